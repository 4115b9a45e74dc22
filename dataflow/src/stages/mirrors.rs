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
//!    ([`count_links`]); the keys with at least `min_paths` shared paths ask each host's
//!    worker how many paths it has under the prefix;
//! 4. per host: the sorted path list answers ([`paths_under`]);
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
//! Every route is a stable hash (xxh3 of the host name, splitmix of the cluster id), every
//! grouping sorts, and each row is decided from all its inputs: the tables are the same at
//! any number of workers and processes.

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use neardup_core::mirrors::{
    cluster_links, count_links, mirror_groups, paths_under, verdict, Link, LinkCount, Mirror,
    MirrorKey, MirrorParams, Page, Verdict,
};
use neardup_core::mix::{mix2, mix64};
use neardup_io::parquet_out::{HostRow, OutputRow, PartWriter};
use serde::{Deserialize, Serialize};
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::vec::{Map, Partition};
use timely::dataflow::StreamVec;
use xxhash_rust::xxh3::xxh3_64;

use crate::operators::CollectComplete;
use crate::output::{OutputDirs, Table};
use crate::records::{Assignment, DocFp};
use crate::worker::WorkerCtx;

fn host_route(host: &str) -> u64 {
    xxh3_64(host.as_bytes())
}

fn pair_route(key: &MirrorKey) -> u64 {
    mix2(host_route(&key.host_a), host_route(&key.host_b))
}

/// What a home worker sends on.
#[derive(Clone, Debug, Serialize, Deserialize)]
enum HomeMsg {
    /// A page in a cluster, to its cluster's worker.
    Clustered(Page),
    /// A page, to its host's worker; with its doc_id when it is clustered and the kept
    /// documents prefer canonical hosts (step 7).
    Hosted {
        host: String,
        path: String,
        doc: Option<u64>,
    },
}

/// What a host's worker learns in step 1: a page, and its doc_id for step 7.
type HostedPage = (String, String, Option<u64>);

/// Which side of a key a request or answer is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Side {
    A,
    B,
}

/// What the host-pair workers and the host workers exchange.
#[derive(Clone, Debug, Serialize, Deserialize)]
enum PairMsg {
    /// A key with enough shared paths, to be judged.
    Candidate(MirrorKey, LinkCount),
    /// How many paths does this side's host have under its prefix?
    Request(MirrorKey, Side),
    /// The answer: paths under the prefix, and the host's documents.
    Answer(MirrorKey, Side, u64, u64),
}

impl PairMsg {
    /// Requests go to the host asked about; candidates and answers to the host pair.
    fn route(&self) -> u64 {
        match self {
            PairMsg::Request(key, Side::A) => host_route(&key.host_a),
            PairMsg::Request(key, Side::B) => host_route(&key.host_b),
            PairMsg::Candidate(key, _) | PairMsg::Answer(key, _, _, _) => pair_route(key),
        }
    }
}

/// A page at its home: `(doc_id, exact key, (host, path))`.
type HomePage = (u64, u128, Box<(String, String)>);

/// A host's documents and distinct paths, kept by its worker for `hosts/`, and the doc_ids
/// of its clustered pages (step 7 only).
type HostInfo = (String, u64, u64, Vec<u64>);

/// Builds the stage (see the module docs) on the documents at their homes and the cluster
/// assignments. Returns the doc_ids of the clustered pages on mirroring hosts, at worker 0,
/// when the keep policy prefers canonical hosts (otherwise an empty stream).
pub fn detect_mirrors<'s>(
    docs: StreamVec<'s, u64, DocFp>,
    assignments: StreamVec<'s, u64, Assignment>,
    ctx: Rc<WorkerCtx>,
) -> StreamVec<'s, u64, u64> {
    let (hosted, clustered) = pages_from_homes(docs, assignments, &ctx);
    let links = links_per_cluster(clustered, &ctx);
    let (requests, candidates) = count_per_host_pair(links, &ctx);
    let (answers, host_infos) = answer_from_hosts(hosted, requests, &ctx);
    let mirrors = judge_candidates(candidates, answers, &ctx);
    let groups = groups_at_worker_0(mirrors, &ctx);
    write_hosts(host_infos, groups, &ctx)
}

/// Step 1: the pages at their homes, once their clusters are known: every page to its
/// host's worker, every clustered page to its cluster's worker.
fn pages_from_homes<'s>(
    docs: StreamVec<'s, u64, DocFp>,
    assignments: StreamVec<'s, u64, Assignment>,
    ctx: &Rc<WorkerCtx>,
) -> (StreamVec<'s, u64, HostedPage>, StreamVec<'s, u64, Page>) {
    let canonical_keep = ctx.shared.config.keep.prefers_canonical_hosts();
    let home = ctx.home.clone();
    // (doc_id, exact key, host and path) of the pages at this home, and their clusters.
    let state: (Vec<HomePage>, HashMap<u64, u64>) = Default::default();
    let home_msgs = docs.collect_complete_with(
        assignments,
        Pipeline,
        Exchange::new(ctx.meter("mirrors", move |a: &Assignment| home.route(a.doc_id))),
        "HomePages",
        state,
        |(pages, _), data| pages.extend(data.drain(..).filter_map(home_page)),
        |(_, clusters), data| clusters.extend(data.drain(..).map(|a| (a.doc_id, a.cluster_id))),
        move |(pages, clusters), give| {
            give.give_iterator(
                pages
                    .into_iter()
                    .flat_map(|p| home_msgs(p, &clusters, canonical_keep)),
            );
        },
    );
    let mut parts = home_msgs.partition(2, |m| match m {
        HomeMsg::Clustered(_) => (0, m),
        HomeMsg::Hosted { .. } => (1, m),
    });
    let hosted = parts.pop().expect("two parts").flat_map(|m| match m {
        HomeMsg::Hosted { host, path, doc } => Some((host, path, doc)),
        HomeMsg::Clustered(_) => None,
    });
    let clustered = parts.pop().expect("two parts").flat_map(|m| match m {
        HomeMsg::Clustered(page) => Some(page),
        HomeMsg::Hosted { .. } => None,
    });
    (hosted, clustered)
}

/// A document with a URL as its home keeps it. Without exact keys (--no-exact), the
/// simhash stands in for "identical content", marked so the two never meet.
fn home_page(d: DocFp) -> Option<HomePage> {
    let exact = match d.exact_key {
        0 => (1 << 127) | d.simhash as u128,
        key => key,
    };
    d.page.map(|p| (d.doc_id, exact, p))
}

/// What a home sends of one page: to its cluster's worker if it is clustered, and to its
/// host's worker (with its doc_id when the kept documents prefer canonical hosts).
fn home_msgs(
    (doc, exact, page): HomePage,
    clusters: &HashMap<u64, u64>,
    canonical_keep: bool,
) -> impl Iterator<Item = HomeMsg> {
    let (host, path) = *page;
    let cluster = clusters.get(&doc).copied();
    let clustered = cluster.map(|cluster| {
        HomeMsg::Clustered(Page {
            host: host.clone(),
            path: path.clone(),
            cluster,
            exact,
        })
    });
    let doc = (canonical_keep && cluster.is_some()).then_some(doc);
    clustered
        .into_iter()
        .chain(std::iter::once(HomeMsg::Hosted { host, path, doc }))
}

/// Step 2: the links of each cluster's pages, at the cluster's worker.
fn links_per_cluster<'s>(
    clustered: StreamVec<'s, u64, Page>,
    ctx: &Rc<WorkerCtx>,
) -> StreamVec<'s, u64, Link> {
    let max_hosts = ctx.shared.config.mirrors.max_cluster_hosts;
    let link_ctx = ctx.clone();
    clustered.collect_complete(
        Exchange::new(ctx.meter("mirrors", |p: &Page| mix64(p.cluster))),
        "ClusterLinks",
        Vec::new(),
        |pages, data| pages.append(data),
        move |mut pages, give| {
            // By cluster, then the page's own order: the links are sorted anyway, so any
            // order within a cluster gives the same.
            pages.sort_unstable_by(|a, b| a.cluster.cmp(&b.cluster).then(a.cmp(b)));
            let mut links: Vec<Link> = Vec::new();
            let mut stars = 0u64;
            for cluster in pages.chunk_by(|a, b| a.cluster == b.cluster) {
                let made = cluster_links(cluster, max_hosts);
                stars += u64::from(made.star);
                links.extend(made.links);
            }
            link_ctx.report.borrow_mut().mirror_star_clusters += stars;
            give.give_iterator(links.into_iter());
        },
    )
}

/// Step 3: shared paths per key at the host pair's worker; the keys with enough ask both
/// hosts for their paths under the prefixes. Returns the requests and the candidates.
fn count_per_host_pair<'s>(
    links: StreamVec<'s, u64, Link>,
    ctx: &Rc<WorkerCtx>,
) -> (StreamVec<'s, u64, PairMsg>, StreamVec<'s, u64, PairMsg>) {
    let min_paths = ctx.shared.config.mirrors.min_paths;
    links.collect_complete_split(
        Exchange::new(ctx.meter("mirrors", |l: &Link| pair_route(&l.key))),
        "CountLinks",
        Vec::new(),
        |links, data, _| links.append(data),
        move |links, requests, candidates| {
            for (key, count) in count_links(links) {
                if count.shared_paths < min_paths {
                    continue;
                }
                requests.give(PairMsg::Request(key.clone(), Side::A));
                requests.give(PairMsg::Request(key.clone(), Side::B));
                candidates.give(PairMsg::Candidate(key, count));
            }
        },
    )
}

/// The paths of each host of one worker, as they come, and its clustered doc_ids.
type HostPaths = HashMap<String, (Vec<String>, Vec<u64>)>;

/// (distinct sorted paths, documents, clustered doc_ids) of the hosts of one worker.
type HostLists = BTreeMap<String, (Vec<String>, u64, Vec<u64>)>;

/// Step 4: at each host's worker, its sorted path list answers the requests; its own row
/// waits for the groups. Returns the answers and the hosts' infos.
fn answer_from_hosts<'s>(
    hosted: StreamVec<'s, u64, HostedPage>,
    requests: StreamVec<'s, u64, PairMsg>,
    ctx: &Rc<WorkerCtx>,
) -> (StreamVec<'s, u64, PairMsg>, StreamVec<'s, u64, HostInfo>) {
    // Each host's paths and clustered doc_ids, and the requests about them.
    let state: (HostPaths, Vec<(MirrorKey, Side)>) = Default::default();
    let host_out = hosted.collect_complete_with(
        requests,
        Exchange::new(ctx.meter("mirrors", |(host, _, _): &HostedPage| host_route(host))),
        Exchange::new(ctx.meter("mirrors", PairMsg::route)),
        "HostPaths",
        state,
        |(paths, _), data| {
            for (host, path, doc) in data.drain(..) {
                let (list, docs) = paths.entry(host).or_default();
                list.push(path);
                docs.extend(doc);
            }
        },
        |(_, requests), data| {
            requests.extend(data.drain(..).filter_map(|m| match m {
                PairMsg::Request(key, side) => Some((key, side)),
                _ => None,
            }))
        },
        |(paths, requests), give| {
            let hosts = host_lists(paths);
            for (key, side) in requests {
                give.give(Ok(answer(&hosts, key, side)));
            }
            for (host, (list, documents, docs)) in hosts {
                give.give(Err((host, documents, list.len() as u64, docs)));
            }
        },
    );
    let mut parts = host_out.partition(2, |m| match m {
        Ok(_) => (0, m),
        Err(_) => (1, m),
    });
    let host_infos = parts.pop().expect("two parts").flat_map(|m| m.err());
    let answers = parts.pop().expect("two parts").flat_map(|m| m.ok());
    (answers, host_infos)
}

/// Each host's paths sorted and deduplicated, with its number of documents.
fn host_lists(paths: HostPaths) -> HostLists {
    paths
        .into_iter()
        .map(|(host, (mut list, docs))| {
            let documents = list.len() as u64;
            list.sort_unstable();
            list.dedup();
            (host, (list, documents, docs))
        })
        .collect()
}

/// The answer to a request: the side's paths under its prefix, and its host's documents.
fn answer(hosts: &HostLists, key: MirrorKey, side: Side) -> PairMsg {
    let (host, prefix) = match side {
        Side::A => (&key.host_a, &key.prefix_a),
        Side::B => (&key.host_b, &key.prefix_b),
    };
    let (under, documents) = hosts
        .get(host)
        .map_or((0, 0), |(list, docs, _)| (paths_under(list, prefix), *docs));
    PairMsg::Answer(key, side, under, documents)
}

/// Step 5: each candidate meets its two answers at the host pair's worker, which judges it
/// and writes `mirrors/`; the `mirror` verdicts go on with both hosts' documents.
fn judge_candidates<'s>(
    candidates: StreamVec<'s, u64, PairMsg>,
    answers: StreamVec<'s, u64, PairMsg>,
    ctx: &Rc<WorkerCtx>,
) -> StreamVec<'s, u64, (Mirror, u64, u64)> {
    let params = ctx.shared.config.mirrors;
    let judge_ctx = ctx.clone();
    let state: (BTreeMap<MirrorKey, LinkCount>, Answered) = Default::default();
    candidates.collect_complete_with(
        answers,
        Exchange::new(ctx.meter("mirrors", PairMsg::route)),
        Exchange::new(ctx.meter("mirrors", PairMsg::route)),
        "JudgeMirrors",
        state,
        |(counts, _), data| {
            for m in data.drain(..) {
                if let PairMsg::Candidate(key, count) = m {
                    counts.insert(key, count);
                }
            }
        },
        |(_, answered), data| {
            for m in data.drain(..) {
                if let PairMsg::Answer(key, side, under, docs) = m {
                    answered.insert((key, side == Side::A), (under, docs));
                }
            }
        },
        move |(counts, answered), give| {
            let (rows, groups) = judge(counts, &answered, &params);
            {
                let mut report = judge_ctx.report.borrow_mut();
                report.mirrors +=
                    rows.iter().filter(|r| r.verdict == Verdict::Mirror).count() as u64;
                report.partial_mirrors += rows
                    .iter()
                    .filter(|r| r.verdict == Verdict::Partial)
                    .count() as u64;
            }
            write_part(&judge_ctx, Table::Mirrors, rows);
            give.give_iterator(groups.into_iter());
        },
    )
}

/// The answers at a host pair's worker: `(key, side is a)` to (paths under the prefix,
/// the host's documents).
type Answered = HashMap<(MirrorKey, bool), (u64, u64)>;

/// The `mirrors/` rows of the candidates, and the `mirror` verdicts with both hosts'
/// documents.
fn judge(
    counts: BTreeMap<MirrorKey, LinkCount>,
    answered: &Answered,
    params: &MirrorParams,
) -> (Vec<Mirror>, Vec<(Mirror, u64, u64)>) {
    let mut rows = Vec::new();
    let mut groups = Vec::new();
    for (key, count) in counts {
        let a = answered
            .get(&(key.clone(), true))
            .copied()
            .unwrap_or_default();
        let b = answered
            .get(&(key.clone(), false))
            .copied()
            .unwrap_or_default();
        let Some(m) = verdict(key, count, a.0, b.0, params) else {
            continue;
        };
        rows.push(m.clone());
        if m.verdict == Verdict::Mirror {
            groups.push((m, a.1, b.1));
        }
    }
    (rows, groups)
}

/// Step 6, at worker 0: the mirror groups of the hosts in `mirror` verdicts, as `(host,
/// canonical host, group size)`.
fn groups_at_worker_0<'s>(
    mirrors: StreamVec<'s, u64, (Mirror, u64, u64)>,
    ctx: &Rc<WorkerCtx>,
) -> StreamVec<'s, u64, (String, String, u64)> {
    mirrors.collect_complete(
        Exchange::new(ctx.meter("mirrors", |_: &(Mirror, u64, u64)| 0)),
        "MirrorGroups",
        Vec::new(),
        |mirrors, data| mirrors.append(data),
        |mirrors, give| {
            let hosts: BTreeMap<String, u64> = mirrors
                .iter()
                .flat_map(|(m, a, b)| [(m.host_a.clone(), *a), (m.host_b.clone(), *b)])
                .collect();
            let hosts: Vec<(String, u64)> = hosts.into_iter().collect();
            let only: Vec<Mirror> = mirrors.into_iter().map(|(m, _, _)| m).collect();
            let rows = mirror_groups(&hosts, &only);
            give.give_iterator(
                rows.into_iter()
                    .map(|g| (g.host, g.canonical_host, g.group_size)),
            );
        },
    )
}

/// Step 6 at each host's worker: `hosts/`, one row per host; and step 7, the doc_ids of the
/// clustered pages on mirroring hosts (collected only under `--keep canonical-host`).
fn write_hosts<'s>(
    host_infos: StreamVec<'s, u64, HostInfo>,
    groups: StreamVec<'s, u64, (String, String, u64)>,
    ctx: &Rc<WorkerCtx>,
) -> StreamVec<'s, u64, u64> {
    let write_ctx = ctx.clone();
    let state: (Vec<HostInfo>, HashMap<String, (String, u64)>) = Default::default();
    host_infos.collect_complete_with(
        groups,
        Pipeline,
        Exchange::new(
            ctx.meter("mirrors", |(host, _, _): &(String, String, u64)| {
                host_route(host)
            }),
        ),
        "WriteHosts",
        state,
        |(infos, _), data| infos.append(data),
        |(_, groups), data| groups.extend(data.drain(..).map(|(h, c, n)| (h, (c, n)))),
        move |(infos, groups), give| {
            let (rows, mirroring) = host_rows(infos, &groups);
            write_ctx.report.borrow_mut().hosts += rows.len() as u64;
            write_part(&write_ctx, Table::Hosts, rows);
            give.give_iterator(mirroring.into_iter());
            write_ctx.stage_done("mirrors");
        },
    )
}

/// The `hosts/` rows of one worker's hosts, sorted, and the doc_ids of their clustered
/// pages on mirroring hosts (in a group, not its canonical host).
fn host_rows(
    mut infos: Vec<HostInfo>,
    groups: &HashMap<String, (String, u64)>,
) -> (Vec<HostRow>, Vec<u64>) {
    infos.sort_unstable();
    let mut mirroring: Vec<u64> = Vec::new();
    let rows = infos
        .into_iter()
        .map(|(host, documents, paths, docs)| {
            let (canonical_host, group_size) = groups
                .get(&host)
                .cloned()
                .unwrap_or_else(|| (host.clone(), 1));
            if canonical_host != host {
                mirroring.extend(docs);
            }
            HostRow {
                host,
                documents,
                paths,
                canonical_host,
                group_size,
            }
        })
        .collect();
    (rows, mirroring)
}

/// Writes this worker's part of `table` (possibly empty, like every table's parts).
fn write_part<R: OutputRow>(ctx: &WorkerCtx, table: Table, rows: Vec<R>) {
    let config = &ctx.shared.config;
    let dir = OutputDirs::new(&config.output).table(table);
    let meta = crate::output::search_meta(config);
    let written = PartWriter::<R>::create(&dir, ctx.part(), &meta).and_then(|mut w| {
        rows.into_iter().try_for_each(|r| w.push(r))?;
        w.commit()
    });
    match written {
        Ok(path) => ctx
            .report
            .borrow_mut()
            .parts
            .push(path.display().to_string()),
        Err(e) => ctx.fail(e.to_string()),
    }
}
