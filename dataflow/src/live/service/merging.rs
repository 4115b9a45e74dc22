//! The service's background merges of its index's generations
//! ([`neardup_io::index::merge`]).
//!
//! A checkpoint merges the newest generations into the one it writes only while they hold
//! [`super::MERGE_LIMIT`] documents at most, since writes wait for it. A service that takes
//! more writes than that between two checkpoints (5,000 a second and the default interval
//! of 300 s make 1.5M) would then add a generation at every checkpoint, and every query and
//! put would probe one more table set each time. So after each checkpoint the writer plans
//! a merge of the newest generations by the same rule (each no larger than the newer ones
//! together: [`background_merge`]), up to [`BACKGROUND_MERGE_LIMIT`] documents, and a
//! thread (`serve-merge`) writes it while writes and queries go on. The first checkpoint
//! after it is written commits it with its own generation; until then a checkpoint's own
//! merge leaves the generations being merged alone ([`Merger::floor`]).
//!
//! The simple version merges in the checkpoint, as it does up to the limit: writes would
//! wait about 5 s for each million documents merged.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use neardup_io::index::{background_merge, Index, IndexWriter, Manifest, MergedGeneration};
use neardup_io::IoError;

use super::Stats;

/// The most documents a background merge writes: 8M (about 40 s on a 2-core machine, at
/// 5 s a million), so that the generations the service makes stay logarithmic in its
/// writes up to that size, and generations of about that size then add up linearly (one
/// every 8M writes). Larger ones, and those `run --index` wrote, `neardup index compact`
/// merges offline.
pub const BACKGROUND_MERGE_LIMIT: u64 = 8 << 20;

/// The background merge, if one was started and not yet committed.
#[derive(Default)]
pub(super) struct Merger {
    running: Option<Running>,
}

struct Running {
    range: Range<usize>,
    cancel: Arc<AtomicBool>,
    thread: JoinHandle<Result<MergedGeneration, IoError>>,
}

impl Merger {
    /// The generations from which on a checkpoint's own merge may take: after those a
    /// background merge takes.
    pub fn floor(&self) -> usize {
        self.running.as_ref().map_or(0, |r| r.range.end)
    }

    /// The merge, if it is written and still fits the index `manifest` (a merge that
    /// failed is reported, and the generations stay as they are).
    pub fn take_finished(
        &mut self,
        manifest: &Manifest,
        stats: &Mutex<Stats>,
    ) -> Option<MergedGeneration> {
        // Written: its thread has finished, or is about to (`merge_running` is false from
        // just before).
        let written = !stats.lock().expect("stats lock").merge_running;
        if !written && !self.running.as_ref()?.thread.is_finished() {
            return None;
        }
        let running = self.running.take()?;
        match running.thread.join() {
            Ok(Ok(merged)) if merged.fits(manifest) => Some(merged),
            Ok(Ok(_)) => None,
            Ok(Err(e)) => {
                eprintln!("neardup serve: a background merge failed (the generations stay as they are): {e}");
                None
            }
            Err(_) => {
                stats.lock().expect("stats lock").merge_running = false;
                eprintln!("neardup serve: a background merge's thread panicked");
                None
            }
        }
    }

    /// Starts a merge of the newest generations of `base` (the index `writer` holds) where
    /// they call for one and no merge runs.
    pub fn start(&mut self, writer: &IndexWriter, base: &Index, stats: &Arc<Mutex<Stats>>) {
        if self.running.is_some() {
            return;
        }
        let generations = &writer.manifest().generations;
        let range = background_merge(generations, &base.present_rows(), BACKGROUND_MERGE_LIMIT);
        if range.is_empty() {
            return;
        }
        let plan = match writer.plan_merge(range.clone()) {
            Ok(plan) => plan,
            Err(e) => {
                eprintln!("neardup serve: cannot plan a background merge: {e}");
                return;
            }
        };
        let cancel = Arc::new(AtomicBool::new(false));
        let (flag, stats_for_thread) = (cancel.clone(), stats.clone());
        // Running from before the thread starts to when it has written the merge.
        stats.lock().expect("stats lock").merge_running = true;
        let spawned = std::thread::Builder::new()
            .name("serve-merge".into())
            .spawn(move || {
                let started = Instant::now();
                let generations = plan.range().len();
                let written = plan.write(&flag);
                let millis = started.elapsed().as_millis() as u64;
                if let Ok(merged) = &written {
                    eprintln!(
                        "neardup serve: background merge: {} documents of {generations} generations written in {:.1} s",
                        merged.documents(),
                        millis as f64 / 1e3
                    );
                }
                let mut stats = stats_for_thread.lock().expect("stats lock");
                stats.merge_millis = millis;
                stats.merge_running = false;
                written
            });
        match spawned {
            Ok(thread) => {
                self.running = Some(Running {
                    range,
                    cancel,
                    thread,
                });
            }
            Err(e) => {
                stats.lock().expect("stats lock").merge_running = false;
                eprintln!("neardup serve: cannot start a background merge's thread: {e}");
            }
        }
    }

    /// Stops the merge (it leaves nothing behind) and waits for its thread.
    pub fn stop(&mut self, stats: &Mutex<Stats>) {
        if let Some(running) = self.running.take() {
            running.cancel.store(true, Ordering::Relaxed);
            let _ = running.thread.join();
            stats.lock().expect("stats lock").merge_running = false;
        }
    }
}
