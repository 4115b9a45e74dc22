//! Drawing the job's live counters: an indicatif spinner for people, JSON lines for batch
//! systems, nothing with --quiet.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{HumanBytes, ProgressBar, ProgressStyle};
use neardup_dataflow::{Progress, Stage};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// Progress bars and a human summary
    Text,
    /// One JSON object per line: periodic progress and the final summary
    Json,
}

/// A thread that shows progress until dropped.
pub struct ProgressView {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ProgressView {
    pub fn start(progress: Arc<Progress>, format: LogFormat, quiet: bool) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = (!quiet).then(|| {
            let stop = stop.clone();
            std::thread::spawn(move || match format {
                LogFormat::Text => draw_bar(&progress, &stop),
                LogFormat::Json => log_json(&progress, &stop),
            })
        });
        ProgressView { stop, thread }
    }
}

impl Drop for ProgressView {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn line(progress: &Progress, elapsed: f64) -> String {
    let docs = Progress::get(&progress.docs_fingerprinted);
    let bytes = Progress::get(&progress.bytes_read);
    let rate = bytes as f64 / elapsed.max(1e-3);
    format!(
        "{}: {docs} documents fingerprinted, {} read ({}/s), {} table records, {} pairs",
        progress.stage().name(),
        HumanBytes(bytes),
        HumanBytes(rate as u64),
        Progress::get(&progress.table_records),
        Progress::get(&progress.pairs)
    )
}

fn draw_bar(progress: &Progress, stop: &AtomicBool) {
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
            .expect("valid template"),
    );
    let start = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        bar.set_message(line(progress, start.elapsed().as_secs_f64()));
        bar.tick();
        std::thread::sleep(Duration::from_millis(200));
    }
    bar.finish_and_clear();
}

fn log_json(progress: &Progress, stop: &AtomicBool) {
    let start = Instant::now();
    let mut last = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if last.elapsed() >= Duration::from_secs(5) || progress.stage() == Stage::Done {
            last = Instant::now();
            let event = serde_json::json!({
                "event": "progress",
                "seconds": start.elapsed().as_secs_f64(),
                "stage": progress.stage().name(),
                "documents": Progress::get(&progress.docs_fingerprinted),
                "bytes_read": Progress::get(&progress.bytes_read),
                "table_records": Progress::get(&progress.table_records),
                "pairs": Progress::get(&progress.pairs),
            });
            eprintln!("{event}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
