//! Mirror hosts: from the content clusters and each document's host and path, the host
//! pairs (and directory prefixes within them) that serve the same paths with the same
//! content, written to `mirrors/`, and every host with its mirror group in `hosts/`. The
//! algorithm is [`neardup_core::mirrors`]; this stage runs its pieces where the data is:
//!
//! 1. at each document's home, once its cluster assignment is back: every page (a document
//!    with a URL) goes to its host's worker (`xxh3(host)`), and every clustered page to its
//!    cluster's worker (`mix64(cluster_id)`);
//! 2. per cluster: the links its pages support ([`cluster_links`]; a cluster over more than
//!    `max_cluster_hosts` hosts links each host only to its anchor, the star rule), sent to
//!    the host pair's worker
//!    (`mix2(xxh3(host_a), xxh3(host_b))`);
//! 3. per host pair: shared and identical paths per `(host_a, prefix_a, host_b, prefix_b)`
//!    (what [`count_links`] counts); the keys with at least `min_paths` shared paths ask
//!    each host's worker how many paths it has under the prefix;
//! 4. per host: its sorted paths answer (what [`paths_under`] counts);
//! 5. per host pair again: candidate and answers meet, [`verdict`] decides, `mirrors/` rows
//!    are written, and `mirror` rows go to worker 0;
//! 6. worker 0: mirror groups ([`mirror_groups`]) of the hosts in them, sent to each host's
//!    worker, which writes `hosts/` (one row per host);
//! 7. with `--keep canonical-host` only: step 1 also sent each clustered page's doc_id to
//!    its host's worker, which now names the pages on *mirroring hosts* (in a group, not
//!    its canonical host) to worker 0; there `prefer_canonical_hosts`
//!    (`stages/clusters.rs`) chooses the kept documents again. The stage returns that
//!    stream (empty under other policies).
//!
//! **Memory.** The simple version of each step collects what it receives in maps (every
//! page at its home with a map from document to cluster, every host's path list, every
//! link) and decides once they are complete. Here each step that groups by a key is an
//! external sort ([`SortComplete`], within [`WEB_SORT_SHARE`] of the worker's part of
//! `--memory-limit` each, sorted runs on local disk beyond it), and its walk holds only the
//! group it is at: one document's cluster, one cluster's pages (as the clusters stage holds
//! one component), one link key's count, one host's open prefixes and the requests about
//! it, one candidate's answers, one host's mirror group. What stays in memory whatever the
//! corpus is worker 0's list of `mirror` verdicts (step 6), one per mirrored host pair.
//!
//! Every route is a stable hash (xxh3 of the host name, splitmix of the cluster id), every
//! grouping sorts, and each row is decided from all its inputs: the tables are the same at
//! any number of workers and processes, and whatever the sorts spilled.

use std::rc::Rc;

use neardup_core::mirrors::{
    cluster_links, mirror_groups, verdict, Link, LinkCount, Mirror, MirrorKey, Page, Verdict,
};
#[cfg(doc)]
use neardup_core::mirrors::{count_links, paths_under};
use neardup_core::mix::{mix2, mix64};
use neardup_io::parquet_out::HostRow;
use neardup_io::spill::SpillRecord;
use serde::{Deserialize, Serialize};
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::vec::{Map, Partition};
use timely::dataflow::operators::Concat;
use timely::dataflow::StreamVec;
use xxhash_rust::xxh3::xxh3_64;

use crate::config::WEB_SORT_SHARE;
use crate::operators::collect::Give;
use crate::operators::sort::ordered_by;
use crate::operators::{CollectComplete, SortComplete};
use crate::output::{Part, Table};
use crate::records::{Assignment, DocFp};
use crate::worker::WorkerCtx;

fn host_route(host: &str) -> u64 {
    xxh3_64(host.as_bytes())
}

fn pair_route(key: &MirrorKey) -> u64 {
    mix2(host_route(&key.host_a), host_route(&key.host_b))
}

/// Heap bytes of a key's four strings.
fn key_bytes(key: &MirrorKey) -> usize {
    key.host_a.capacity()
        + key.prefix_a.capacity()
        + key.host_b.capacity()
        + key.prefix_b.capacity()
}

/// Which side of a key a request or answer is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
enum Side {
    A,
    B,
}

impl Side {
    fn of(key: &MirrorKey, side: Side) -> (&str, &str) {
        match side {
            Side::A => (&key.host_a, &key.prefix_a),
            Side::B => (&key.host_b, &key.prefix_b),
        }
    }
}

/// Step 1's sort at each home: a document's cluster before its page, by document.
#[derive(Clone, Debug, Serialize, Deserialize)]
enum AtHome {
    Cluster { doc: u64, cluster: u64 },
    Page(u64, u128, Box<(String, String)>),
}

impl AtHome {
    fn key(&self) -> (u64, u8) {
        match self {
            AtHome::Cluster { doc, .. } => (*doc, 0),
            AtHome::Page(doc, _, _) => (*doc, 1),
        }
    }
}

ordered_by!(AtHome, |r| r.key());
impl SpillRecord for AtHome {
    fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + match self {
                AtHome::Page(_, _, page) => 48 + page.0.capacity() + page.1.capacity(),
                AtHome::Cluster { .. } => 0,
            }
    }
}

/// What step 1 sends to a host's worker: a page's path (step 4), or the doc_id of a
/// clustered page for step 7.
#[derive(Clone, Debug, Serialize, Deserialize)]
enum ToHost {
    Path(String, String),
    Doc(String, u64),
}

/// Step 2's sort: a cluster's pages together, in the pages' own order.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct InCluster(Page);

ordered_by!(
    InCluster,
    cmp | a,
    b | a.0.cluster.cmp(&b.0.cluster).then_with(|| a.0.cmp(&b.0))
);
impl SpillRecord for InCluster {
    fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.0.host.capacity() + self.0.path.capacity()
    }
}

/// Step 3's sort: the links by key, then shared path.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct ByKey(Link);

ordered_by!(ByKey, cmp | a, b | a.0.cmp(&b.0));
impl SpillRecord for ByKey {
    fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + key_bytes(&self.0.key) + self.0.rel.capacity()
    }
}

/// Step 4's sort at a host's worker: by host, then by path or prefix, a request before a
/// path equal to its prefix; so the paths under a prefix follow its request at once.
#[derive(Clone, Debug, Serialize, Deserialize)]
enum AtHost {
    Request(MirrorKey, Side),
    Path(String, String),
}

impl AtHost {
    /// (host, path or prefix, 0 for a request and 1 for a path).
    fn key(&self) -> (&str, &str, u8) {
        match self {
            AtHost::Request(key, side) => {
                let (host, prefix) = Side::of(key, *side);
                (host, prefix, 0)
            }
            AtHost::Path(host, path) => (host, path, 1),
        }
    }

    fn host(&self) -> &str {
        self.key().0
    }
}

ordered_by!(
    AtHost,
    cmp | a,
    b | a.key().cmp(&b.key()).then_with(|| match (a, b) {
        (AtHost::Request(ka, sa), AtHost::Request(kb, sb)) => (ka, sa).cmp(&(kb, sb)),
        _ => std::cmp::Ordering::Equal,
    })
);
impl SpillRecord for AtHost {
    fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + match self {
                AtHost::Request(key, _) => key_bytes(key),
                AtHost::Path(host, path) => host.capacity() + path.capacity(),
            }
    }
}

/// Step 5's sort at a host pair's worker: a candidate, then its two answers (paths under
/// the side's prefix, the side's host's documents).
#[derive(Clone, Debug, Serialize, Deserialize)]
enum Judged {
    Candidate(MirrorKey, LinkCount),
    Answer(MirrorKey, Side, u64, u64),
}

impl Judged {
    fn key(&self) -> &MirrorKey {
        match self {
            Judged::Candidate(key, _) | Judged::Answer(key, _, _, _) => key,
        }
    }

    fn tag(&self) -> u8 {
        match self {
            Judged::Candidate(..) => 0,
            Judged::Answer(_, Side::A, _, _) => 1,
            Judged::Answer(_, Side::B, _, _) => 2,
        }
    }
}

ordered_by!(
    Judged,
    cmp | a,
    b | (a.key(), a.tag()).cmp(&(b.key(), b.tag()))
);
impl SpillRecord for Judged {
    fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + key_bytes(self.key())
    }
}

/// Step 6's sort at a host's worker: its mirror group (from worker 0), its documents and
/// distinct paths (from step 4), then its clustered doc_ids (step 7).
#[derive(Clone, Debug, Serialize, Deserialize)]
enum HostPart {
    Group(String, String, u64),
    Counts(String, u64, u64),
    Doc(String, u64),
}

impl HostPart {
    fn key(&self) -> (&str, u8, u64) {
        match self {
            HostPart::Group(host, _, _) => (host, 0, 0),
            HostPart::Counts(host, _, _) => (host, 1, 0),
            HostPart::Doc(host, doc) => (host, 2, *doc),
        }
    }
}

ordered_by!(HostPart, cmp | a, b | a.key().cmp(&b.key()));
impl SpillRecord for HostPart {
    fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + match self {
                HostPart::Group(host, canonical, _) => host.capacity() + canonical.capacity(),
                HostPart::Counts(host, _, _) | HostPart::Doc(host, _) => host.capacity(),
            }
    }
}

/// Builds the stage (see the module docs) on the documents at their homes and the cluster
/// assignments. Returns the doc_ids of the clustered pages on mirroring hosts, at worker 0,
/// when the keep policy prefers canonical hosts (otherwise an empty stream).
pub fn detect_mirrors<'s>(
    docs: StreamVec<'s, u64, DocFp>,
    assignments: StreamVec<'s, u64, Assignment>,
    ctx: Rc<WorkerCtx>,
) -> StreamVec<'s, u64, u64> {
    let (to_hosts, clustered) = pages_from_homes(docs, assignments, &ctx);
    let mut parts = to_hosts.partition(2, |m| match m {
        ToHost::Path(..) => (0, m),
        ToHost::Doc(..) => (1, m),
    });
    let docs = parts.pop().expect("two parts").flat_map(|m| match m {
        ToHost::Doc(host, doc) => Some(HostPart::Doc(host, doc)),
        ToHost::Path(..) => None,
    });
    let paths = parts.pop().expect("two parts").flat_map(|m| match m {
        ToHost::Path(host, path) => Some(AtHost::Path(host, path)),
        ToHost::Doc(..) => None,
    });
    let links = links_per_cluster(clustered, &ctx);
    let (requests, candidates) = count_per_host_pair(links, &ctx);
    let (answers, counts) = answer_from_hosts(paths.concat(requests), &ctx);
    let mirrors = judge_candidates(candidates.concat(answers), &ctx);
    let groups = groups_at_worker_0(mirrors, &ctx);
    write_hosts(groups.concat(counts).concat(docs), &ctx)
}

/// Step 1: the pages at their homes, once their clusters are known: every page to its
/// host's worker, every clustered page to its cluster's worker. Returns what goes to the
/// hosts and the clustered pages.
///
/// The simple version keeps the home's pages and a map from document to cluster until
/// both are complete; here the two are sorted together by document, each cluster before
/// its page.
fn pages_from_homes<'s>(
    docs: StreamVec<'s, u64, DocFp>,
    assignments: StreamVec<'s, u64, Assignment>,
    ctx: &Rc<WorkerCtx>,
) -> (StreamVec<'s, u64, ToHost>, StreamVec<'s, u64, Page>) {
    let canonical_keep = ctx.shared.config.keep.prefers_canonical_hosts();
    let home = ctx.home.clone();
    let pages = docs.flat_map(home_page);
    let clusters = assignments.map(|a| AtHome::Cluster {
        doc: a.doc_id,
        cluster: a.cluster_id,
    });
    let (done, fail) = (ctx.clone(), ctx.clone());
    let (to_hosts, clustered) = pages
        .concat(clusters)
        .sort_complete_split::<AtHome, ToHost, Page, _, _>(
            Exchange::new(ctx.meter("mirrors", move |r: &AtHome| home.route(r.key().0))),
            "MirrorPages",
            ctx.sort("mirror pages", WEB_SORT_SHARE),
            None::<(u64, u64)>,
            |_, _| {},
            move |cluster_of, r, hosts, clustered| match r {
                AtHome::Cluster { doc, cluster } => *cluster_of = Some((doc, cluster)),
                AtHome::Page(doc, exact, page) => {
                    let (host, path) = *page;
                    let cluster = cluster_of.filter(|(d, _)| *d == doc).map(|(_, c)| c);
                    if let Some(cluster) = cluster {
                        clustered.give(Page {
                            host: host.clone(),
                            path: path.clone(),
                            cluster,
                            exact,
                        });
                        if canonical_keep {
                            hosts.give(ToHost::Doc(host.clone(), doc));
                        }
                    }
                    hosts.give(ToHost::Path(host, path));
                }
            },
            move |_, stats, _, _| done.sorted("mirror pages", stats),
            move |e| fail.sort_failed("mirror pages", e),
        );
    (to_hosts, clustered)
}

/// A document with a URL as its home keeps it. Without exact keys (--no-exact), the
/// simhash stands in for "identical content", marked so the two never meet.
fn home_page(d: DocFp) -> Option<AtHome> {
    let exact = match d.exact_key {
        0 => (1 << 127) | d.simhash as u128,
        key => key,
    };
    d.page.map(|p| AtHome::Page(d.doc_id, exact, p))
}

/// Step 2: the links of each cluster's pages, at the cluster's worker, one cluster at a
/// time as the sort by cluster is walked.
fn links_per_cluster<'s>(
    clustered: StreamVec<'s, u64, Page>,
    ctx: &Rc<WorkerCtx>,
) -> StreamVec<'s, u64, ByKey> {
    let max_hosts = ctx.shared.config.mirrors.max_cluster_hosts;
    let (done, fail) = (ctx.clone(), ctx.clone());
    clustered
        .map(InCluster)
        .sort_complete_split::<InCluster, ByKey, (), _, _>(
            Exchange::new(ctx.meter("mirrors", |p: &InCluster| mix64(p.0.cluster))),
            "MirrorClusters",
            ctx.sort("mirror clusters", WEB_SORT_SHARE),
            (Vec::<Page>::new(), 0u64),
            |_, _| {},
            move |(pages, stars), InCluster(page), links, _| {
                if pages.first().is_some_and(|p| p.cluster != page.cluster) {
                    links.give_iterator(flush(pages, max_hosts, stars).into_iter().map(ByKey));
                }
                pages.push(page);
            },
            move |(mut pages, mut stars), stats, links, _| {
                links.give_iterator(
                    flush(&mut pages, max_hosts, &mut stars)
                        .into_iter()
                        .map(ByKey),
                );
                done.report.borrow_mut().mirror_star_clusters += stars;
                done.sorted("mirror clusters", stats);
            },
            move |e| fail.sort_failed("mirror clusters", e),
        )
        .0
}

/// The links of one cluster's pages (emptied), counting a star cluster.
fn flush(pages: &mut Vec<Page>, max_hosts: usize, stars: &mut u64) -> Vec<Link> {
    let made = cluster_links(pages, max_hosts);
    *stars += u64::from(made.star);
    pages.clear();
    made.links
}

/// Step 3's walk: the key and the shared path it is at.
#[derive(Default)]
struct LinkWalk {
    key: Option<MirrorKey>,
    count: LinkCount,
    rel: Option<String>,
    identical: bool,
}

impl LinkWalk {
    /// Takes the next link in order; returns a key whose links are all counted.
    fn step(&mut self, link: Link) -> Option<(MirrorKey, LinkCount)> {
        if self.key.as_ref() == Some(&link.key) && self.rel.as_ref() == Some(&link.rel) {
            self.identical |= link.identical;
            return None;
        }
        self.close_path();
        let done = (self.key.as_ref() != Some(&link.key))
            .then(|| self.close_key())
            .flatten();
        if self.key.is_none() {
            self.key = Some(link.key);
        }
        self.rel = Some(link.rel);
        self.identical = link.identical;
        done
    }

    fn close_path(&mut self) {
        if self.rel.take().is_some() {
            self.count.shared_paths += 1;
            self.count.identical_paths += u64::from(self.identical);
        }
    }

    fn close_key(&mut self) -> Option<(MirrorKey, LinkCount)> {
        self.close_path();
        let key = self.key.take()?;
        Some((key, std::mem::take(&mut self.count)))
    }
}

/// Step 3: shared paths per key at the host pair's worker, as the links sorted by key are
/// walked; the keys with enough ask both hosts for their paths under the prefixes.
/// Returns the requests and the candidates.
fn count_per_host_pair<'s>(
    links: StreamVec<'s, u64, ByKey>,
    ctx: &Rc<WorkerCtx>,
) -> (StreamVec<'s, u64, AtHost>, StreamVec<'s, u64, Judged>) {
    let min_paths = ctx.shared.config.mirrors.min_paths;
    let (done, fail) = (ctx.clone(), ctx.clone());
    links.sort_complete_split::<ByKey, AtHost, Judged, _, _>(
        Exchange::new(ctx.meter("mirrors", |l: &ByKey| pair_route(&l.0.key))),
        "MirrorLinks",
        ctx.sort("mirror links", WEB_SORT_SHARE),
        LinkWalk::default(),
        |_, _| {},
        move |walk, ByKey(link), requests, candidates| {
            if let Some(counted) = walk.step(link) {
                ask(counted, min_paths, requests, candidates);
            }
        },
        move |mut walk, stats, requests, candidates| {
            if let Some(counted) = walk.close_key() {
                ask(counted, min_paths, requests, candidates);
            }
            done.sorted("mirror links", stats);
        },
        move |e| fail.sort_failed("mirror links", e),
    )
}

/// A key with at least `min_paths` shared paths asks both its hosts, and waits for their
/// answers as a candidate.
fn ask(
    (key, count): (MirrorKey, LinkCount),
    min_paths: u64,
    requests: &mut Give<'_, '_, u64, AtHost>,
    candidates: &mut Give<'_, '_, u64, Judged>,
) {
    if count.shared_paths >= min_paths {
        requests.give(AtHost::Request(key.clone(), Side::A));
        requests.give(AtHost::Request(key.clone(), Side::B));
        candidates.give(Judged::Candidate(key, count));
    }
}

/// A prefix asked about at a host, its distinct paths so far, and who asked.
type OpenPrefix = (String, u64, Vec<(MirrorKey, Side)>);

/// Step 4's walk: the host it is at, its documents and distinct paths so far, the prefixes
/// whose paths are being counted (each a prefix of the next), and the answers waiting for
/// the host's number of documents.
#[derive(Default)]
struct HostWalk {
    host: Option<String>,
    documents: u64,
    paths: u64,
    last_path: Option<String>,
    open: Vec<OpenPrefix>,
    answered: Vec<(MirrorKey, Side, u64)>,
}

impl HostWalk {
    /// Takes the next record in order; returns what a finished host gives.
    fn step(&mut self, r: AtHost) -> Option<(Vec<Judged>, Option<HostPart>)> {
        let done = (self.host.as_deref() != Some(r.host()))
            .then(|| self.finish())
            .flatten();
        if self.host.is_none() {
            self.host = Some(r.host().to_owned());
        }
        match r {
            AtHost::Request(key, side) => {
                let prefix = Side::of(&key, side).1.to_owned();
                self.close_outside(Some(&prefix));
                match self.open.last_mut() {
                    Some((open, _, asked)) if *open == prefix => asked.push((key, side)),
                    _ => self.open.push((prefix, 0, vec![(key, side)])),
                }
            }
            AtHost::Path(_, path) => {
                self.documents += 1;
                if self.last_path.as_ref() != Some(&path) {
                    self.paths += 1;
                    self.close_outside(Some(&path));
                    // Nested: a path under the innermost prefix is under all of them.
                    for (_, under, _) in &mut self.open {
                        *under += 1;
                    }
                    self.last_path = Some(path);
                }
            }
        }
        done
    }

    /// Closes the open prefixes that `next` (a path or prefix, in sorted order) is not
    /// under: nothing after it in the sort is. `None`: the host's end closes them all.
    fn close_outside(&mut self, next: Option<&str>) {
        while let Some((prefix, under, asked)) = self.open.pop() {
            if next.is_some_and(|next| next.starts_with(&prefix)) {
                self.open.push((prefix, under, asked));
                break;
            }
            self.answered
                .extend(asked.into_iter().map(|(key, side)| (key, side, under)));
        }
    }

    /// The host's answers and its counts, and a fresh walk.
    fn finish(&mut self) -> Option<(Vec<Judged>, Option<HostPart>)> {
        self.close_outside(None);
        let done = std::mem::take(self);
        let host = done.host?;
        let answers = done
            .answered
            .into_iter()
            .map(|(key, side, under)| Judged::Answer(key, side, under, done.documents))
            .collect();
        let counts =
            (done.documents > 0).then_some(HostPart::Counts(host, done.documents, done.paths));
        Some((answers, counts))
    }
}

/// Gives what a finished host gives: its answers, and its counts.
fn give_host(
    finished: Option<(Vec<Judged>, Option<HostPart>)>,
    answers: &mut Give<'_, '_, u64, Judged>,
    counts: &mut Give<'_, '_, u64, HostPart>,
) {
    if let Some((answered, host)) = finished {
        answers.give_iterator(answered.into_iter());
        counts.give_iterator(host.into_iter());
    }
}

/// Step 4: at each host's worker, the requests and the host's paths sorted together, so
/// that each prefix's distinct paths are counted as they pass. Returns the answers and the
/// hosts' counts.
///
/// The simple version keeps every host's path list, sorted and deduplicated, and counts
/// the paths under each prefix by binary search ([`paths_under`]).
fn answer_from_hosts<'s>(
    at_hosts: StreamVec<'s, u64, AtHost>,
    ctx: &Rc<WorkerCtx>,
) -> (StreamVec<'s, u64, Judged>, StreamVec<'s, u64, HostPart>) {
    let (done, fail) = (ctx.clone(), ctx.clone());
    at_hosts.sort_complete_split::<AtHost, Judged, HostPart, _, _>(
        Exchange::new(ctx.meter("mirrors", |r: &AtHost| host_route(r.host()))),
        "MirrorHosts",
        ctx.sort("mirror hosts", WEB_SORT_SHARE),
        HostWalk::default(),
        |_, _| {},
        move |walk, r, answers, counts| give_host(walk.step(r), answers, counts),
        move |mut walk, stats, answers, counts| {
            give_host(walk.finish(), answers, counts);
            done.sorted("mirror hosts", stats);
        },
        move |e| fail.sort_failed("mirror hosts", e),
    )
}

/// Step 5's walk: the candidate it is at and its answers (paths under the prefix, the
/// host's documents), and this worker's part of `mirrors/`.
struct JudgeWalk {
    key: Option<MirrorKey>,
    count: Option<LinkCount>,
    a: (u64, u64),
    b: (u64, u64),
    part: Part<Mirror>,
}

impl JudgeWalk {
    /// The verdict of the candidate walked (written to the part), and its `mirror` row
    /// with both hosts' documents for the groups.
    fn judge(&mut self, ctx: &WorkerCtx) -> Option<(Mirror, u64, u64)> {
        let (key, count) = (self.key.take(), self.count.take());
        let (a, b) = (std::mem::take(&mut self.a), std::mem::take(&mut self.b));
        let m = verdict(key?, count?, a.0, b.0, &ctx.shared.config.mirrors)?;
        {
            let mut report = ctx.report.borrow_mut();
            match m.verdict {
                Verdict::Mirror => report.mirrors += 1,
                Verdict::Partial => report.partial_mirrors += 1,
            }
        }
        let group = (m.verdict == Verdict::Mirror).then(|| (m.clone(), a.1, b.1));
        self.part.push(ctx, m);
        group
    }
}

/// Step 5: each candidate meets its two answers at the host pair's worker (sorted
/// together by key), which judges it and writes `mirrors/` in key order; the `mirror`
/// verdicts go on with both hosts' documents.
fn judge_candidates<'s>(
    judged: StreamVec<'s, u64, Judged>,
    ctx: &Rc<WorkerCtx>,
) -> StreamVec<'s, u64, (Mirror, u64, u64)> {
    let (each, done, fail) = (ctx.clone(), ctx.clone(), ctx.clone());
    let walk = JudgeWalk {
        key: None,
        count: None,
        a: (0, 0),
        b: (0, 0),
        part: Part::create(ctx, Table::Mirrors),
    };
    judged
        .sort_complete_split::<Judged, (Mirror, u64, u64), (), _, _>(
            Exchange::new(ctx.meter("mirrors", |r: &Judged| pair_route(r.key()))),
            "JudgeMirrors",
            ctx.sort("mirror candidates", WEB_SORT_SHARE),
            walk,
            |_, _| {},
            move |walk, r, groups, _| {
                if walk.key.as_ref() != Some(r.key()) {
                    groups.give_iterator(walk.judge(&each).into_iter());
                    walk.key = Some(r.key().clone());
                }
                match r {
                    Judged::Candidate(_, count) => walk.count = Some(count),
                    Judged::Answer(_, Side::A, under, docs) => walk.a = (under, docs),
                    Judged::Answer(_, Side::B, under, docs) => walk.b = (under, docs),
                }
            },
            move |mut walk, stats, groups, _| {
                groups.give_iterator(walk.judge(&done).into_iter());
                walk.part.commit(&done);
                done.sorted("mirror candidates", stats);
            },
            move |e| fail.sort_failed("mirror candidates", e),
        )
        .0
}

/// Step 6, at worker 0: the mirror groups of the hosts in `mirror` verdicts, as their
/// hosts' [`HostPart::Group`].
fn groups_at_worker_0<'s>(
    mirrors: StreamVec<'s, u64, (Mirror, u64, u64)>,
    ctx: &Rc<WorkerCtx>,
) -> StreamVec<'s, u64, HostPart> {
    mirrors.collect_complete(
        Exchange::new(ctx.meter("mirrors", |_: &(Mirror, u64, u64)| 0)),
        "MirrorGroups",
        Vec::new(),
        |mirrors, data| mirrors.append(data),
        |mirrors, give| {
            let hosts: std::collections::BTreeMap<String, u64> = mirrors
                .iter()
                .flat_map(|(m, a, b)| [(m.host_a.clone(), *a), (m.host_b.clone(), *b)])
                .collect();
            let hosts: Vec<(String, u64)> = hosts.into_iter().collect();
            let only: Vec<Mirror> = mirrors.into_iter().map(|(m, _, _)| m).collect();
            let rows = mirror_groups(&hosts, &only);
            give.give_iterator(
                rows.into_iter()
                    .map(|g| HostPart::Group(g.host, g.canonical_host, g.group_size)),
            );
        },
    )
}

/// Step 6's walk at a host's worker: the host whose group was given last, and this
/// worker's part of `hosts/`.
struct RowWalk {
    group: Option<(String, String, u64)>,
    part: Part<HostRow>,
}

/// Step 6 at each host's worker: `hosts/`, one row per host, in host order; and step 7,
/// the doc_ids of the clustered pages on mirroring hosts (collected only under `--keep
/// canonical-host`), to worker 0.
fn write_hosts<'s>(
    parts: StreamVec<'s, u64, HostPart>,
    ctx: &Rc<WorkerCtx>,
) -> StreamVec<'s, u64, u64> {
    let (each, done, fail) = (ctx.clone(), ctx.clone(), ctx.clone());
    let walk = RowWalk {
        group: None,
        part: Part::create(ctx, Table::Hosts),
    };
    parts
        .sort_complete_split::<HostPart, u64, (), _, _>(
            Exchange::new(ctx.meter("mirrors", |r: &HostPart| host_route(r.key().0))),
            "WriteHosts",
            ctx.sort("mirror host rows", WEB_SORT_SHARE),
            walk,
            |_, _| {},
            move |walk, r, mirroring, _| {
                let group_of = |host: &str, walk: &RowWalk| {
                    walk.group
                        .as_ref()
                        .filter(|(h, _, _)| h == host)
                        .map(|(_, canonical, size)| (canonical.clone(), *size))
                };
                match r {
                    HostPart::Group(host, canonical, size) => {
                        walk.group = Some((host, canonical, size))
                    }
                    HostPart::Counts(host, documents, paths) => {
                        let (canonical_host, group_size) =
                            group_of(&host, walk).unwrap_or_else(|| (host.clone(), 1));
                        each.report.borrow_mut().hosts += 1;
                        walk.part.push(
                            &each,
                            HostRow {
                                host,
                                documents,
                                paths,
                                canonical_host,
                                group_size,
                            },
                        );
                    }
                    HostPart::Doc(host, doc) => {
                        if group_of(&host, walk).is_some_and(|(canonical, _)| canonical != host) {
                            mirroring.give(doc);
                        }
                    }
                }
            },
            move |walk, stats, _, _| {
                walk.part.commit(&done);
                done.sorted("mirror host rows", stats);
                done.stage_done("mirrors");
            },
            move |e| fail.sort_failed("mirror host rows", e),
        )
        .0
}

#[cfg(test)]
mod tests {
    use super::*;
    use neardup_core::mirrors::{count_links, paths_under};
    use neardup_core::mix::splitmix64;
    use std::collections::BTreeMap;

    fn key(host_a: &str, prefix_a: &str, host_b: &str, prefix_b: &str) -> MirrorKey {
        MirrorKey {
            host_a: host_a.into(),
            prefix_a: prefix_a.into(),
            host_b: host_b.into(),
            prefix_b: prefix_b.into(),
        }
    }

    /// Random paths of a few levels over a small alphabet, so that prefixes nest and repeat.
    fn path(state: &mut u64) -> String {
        let depth = 1 + splitmix64(state) % 4;
        let mut p = String::new();
        for _ in 0..depth {
            p.push('/');
            p.push_str(["a", "b", "ab", "a.html", ""][(splitmix64(state) % 5) as usize]);
        }
        p
    }

    /// The sorted walk answers every request as the simple version does: the host's
    /// distinct paths under the prefix by binary search in its sorted list
    /// ([`paths_under`]), with the host's documents; and counts each host.
    #[test]
    fn host_walk_counts_the_paths_under_each_prefix_as_paths_under() {
        let mut state = 3;
        for round in 0..50 {
            let mut records = Vec::new();
            let mut lists: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for _ in 0..(splitmix64(&mut state) % 60) {
                let host = format!("h{}", splitmix64(&mut state) % 3);
                let p = path(&mut state);
                lists.entry(host.clone()).or_default().push(p.clone());
                records.push(AtHost::Path(host, p));
            }
            for _ in 0..(splitmix64(&mut state) % 20) {
                let host = format!("h{}", splitmix64(&mut state) % 4);
                let mut prefix = path(&mut state);
                prefix.truncate(prefix.rfind('/').unwrap() + 1);
                let other = format!("o{}", splitmix64(&mut state) % 2);
                let (k, side) = match splitmix64(&mut state) % 2 {
                    0 => (key(&host, &prefix, &other, "/"), Side::A),
                    _ => (key(&other, "/", &host, &prefix), Side::B),
                };
                records.push(AtHost::Request(k, side));
            }
            let mut simple: Vec<Judged> = Vec::new();
            let mut counted = Vec::new();
            for r in &records {
                if let AtHost::Request(k, side) = r {
                    let (host, prefix) = Side::of(k, *side);
                    let documents = lists.get(host).map_or(0, |l| l.len() as u64);
                    let mut list = lists.get(host).cloned().unwrap_or_default();
                    list.sort();
                    list.dedup();
                    let under = paths_under(&list, prefix);
                    simple.push(Judged::Answer(k.clone(), *side, under, documents));
                }
            }
            for (host, list) in &lists {
                let mut distinct = list.clone();
                distinct.sort();
                distinct.dedup();
                counted.push((host.clone(), list.len() as u64, distinct.len() as u64));
            }
            records.sort();
            let mut walk = HostWalk::default();
            let (mut answers, mut hosts) = (Vec::new(), Vec::new());
            let mut take = |done: Option<(Vec<Judged>, Option<HostPart>)>| {
                if let Some((a, h)) = done {
                    answers.extend(a);
                    hosts.extend(h.map(|h| match h {
                        HostPart::Counts(host, documents, paths) => (host, documents, paths),
                        _ => unreachable!("only counts"),
                    }));
                }
            };
            for r in records {
                take(walk.step(r));
            }
            take(walk.finish());
            let show = |v: &mut Vec<Judged>| {
                let mut s: Vec<String> = v.iter().map(|j| format!("{j:?}")).collect();
                s.sort();
                s
            };
            assert_eq!(show(&mut answers), show(&mut simple), "round {round}");
            assert_eq!(hosts, counted, "round {round}");
        }
    }

    /// The walk over sorted links counts each key as [`count_links`] does.
    #[test]
    fn link_walk_counts_as_count_links() {
        let mut state = 11;
        for round in 0..50 {
            let links: Vec<Link> = (0..(splitmix64(&mut state) % 80))
                .map(|_| Link {
                    key: key(
                        &format!("a{}", splitmix64(&mut state) % 2),
                        "/",
                        &format!("b{}", splitmix64(&mut state) % 3),
                        "/m/",
                    ),
                    rel: format!("p{}", splitmix64(&mut state) % 5),
                    identical: splitmix64(&mut state).is_multiple_of(3),
                })
                .collect();
            let simple: Vec<(MirrorKey, LinkCount)> =
                count_links(links.clone()).into_iter().collect();
            let mut sorted = links;
            sorted.sort();
            let mut walk = LinkWalk::default();
            let mut got: Vec<(MirrorKey, LinkCount)> =
                sorted.into_iter().filter_map(|l| walk.step(l)).collect();
            got.extend(walk.close_key());
            assert_eq!(got, simple, "round {round}");
        }
    }
}
