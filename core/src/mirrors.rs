//! Mirror hosts: two hosts (or two directories of them) that serve the same paths with the
//! same content, found from the content clusters of their pages.
//!
//! The idea: a mirror copies a site whole, so for most paths `p`, `host_a/alpha/p` exists
//! if and only if `host_b/beta/p` does, with identical or nearly identical content. Two
//! copies of one page (two pages in one content cluster, on different hosts) say which
//! `alpha` and `beta` they support: the longest common suffix of their path segments is
//! `p`, and what precedes it on each side is the prefix (`/docs/2.4/x.html` and
//! `/apache/docs/2.4/x.html` support `alpha = /`, `beta = /apache/`, `p = docs/2.4/x.html`).
//! Copies whose last segments differ support nothing: the same text under unrelated names is
//! a duplicate, not a mirror. Copies at the same path support `alpha = beta = /` (the
//! longest suffix is the whole path): a subtree copied to the same place on a host that holds
//! little else is a `partial` mirror of the whole origin host. Counting, for every `(host_a, alpha, host_b, beta)`, the
//! distinct `p` that support it gives `shared_paths`; dividing by the pages each side has
//! under its prefix gives the shares; the thresholds give the verdict:
//!
//! - `mirror`: at least [`MirrorParams::min_paths`] shared paths, and both shares at least
//!   [`MirrorParams::min_share`] (most paths both ways);
//! - `partial`: as many shared paths, and one share at least `min_share` (one side is
//!   largely contained in the other: a mirrored subtree);
//! - otherwise nothing is reported.
//!
//! A shared path is *identical* when some pair of its copies has the same exact-duplicate
//! key (the same normalized token stream), *near* otherwise (the same near-duplicate cluster:
//! a mirror that inserts an advertisement line).
//!
//! **Boilerplate and large mirror networks.** Pages every site has (`robots.txt`, a 404
//! page, a parked-domain template) form clusters spread over many hosts, and comparing
//! every two of their copies would cost `h(h-1)/2` host pairs for `h` hosts: half a
//! trillion for a robots.txt a million hosts share. A mirror network is spread as widely
//! (the Apache project once listed 281 mirrors), so skipping wide clusters would lose it.
//! The *star rule*: a cluster whose pages lie on more than [`MirrorParams::max_cluster_hosts`]
//! distinct hosts links each of its hosts only to its *anchor*, the host with the smallest
//! name (`h - 1` host pairs instead of `h(h-1)/2`; counted as a star cluster). The pages of
//! a mirror network all lie on the same hosts, so they all pick the same anchor: every
//! mirror is reported against the anchor, and the mirror group in `hosts/` (connected
//! mirrors) is still the whole network. A robots.txt shared by a million hosts costs a
//! million links, each supporting one shared path between the anchor and one host, which
//! stays under [`MirrorParams::min_paths`] like the handful of boilerplate pages any two
//! unrelated sites share.
//!
//! **Cost.** Only copies with the same last path segment can link, pages on one host never
//! link, and copies at one place (host and path) link alike: [`cluster_links`] sorts a
//! cluster's pages into distinct places by last segment and host and compares only places
//! that make a link, so its work is a sort and one comparison per link made, never the
//! square of a cluster's pages (a soft-404 page at 100,000 paths of one host compares none).
//!
//! The pieces ([`cluster_links`], [`count_links`], [`paths_under`], [`verdict`],
//! [`mirror_groups`]) are what the dataflow stage runs on different workers (by cluster, by
//! host pair, by host); [`find_mirrors`] composes them in one place, for tests and small
//! inputs.
//!
//! ```
//! use neardup_core::mirrors::{find_mirrors, MirrorParams, Page, Verdict};
//!
//! let mut pages = Vec::new();
//! for (i, name) in ["a", "b", "c", "d", "e"].iter().enumerate() {
//!     pages.push(Page::new("one.org", &format!("/{name}.html"), i as u64, i as u128));
//!     pages.push(Page::new("two.net", &format!("/mirror/one/{name}.html"), i as u64, i as u128));
//! }
//! let mirrors = find_mirrors(&pages, &MirrorParams::default());
//! assert_eq!(mirrors.len(), 1);
//! let m = &mirrors[0];
//! assert_eq!((m.host_a.as_str(), m.prefix_a.as_str()), ("one.org", "/"));
//! assert_eq!((m.host_b.as_str(), m.prefix_b.as_str()), ("two.net", "/mirror/one/"));
//! assert_eq!((m.shared_paths, m.identical_paths, m.verdict), (5, 5, Verdict::Mirror));
//! ```

use std::collections::{BTreeMap, BTreeSet};

/// Shared paths a host pair needs to be reported (`--mirror-min-paths`): more than the
/// few boilerplate pages (robots.txt, 404, home page template) unrelated sites share.
pub const DEFAULT_MIN_PATHS: u64 = 5;
/// The share of a prefix's pages that must be shared (`--mirror-min-share`): most of them.
pub const DEFAULT_MIN_SHARE: f64 = 0.5;
/// Clusters spread over more hosts than this follow the star rule (see the module docs):
/// each host is linked only to the cluster's anchor. A cluster over `h` hosts makes
/// `h(h-1)/2` host pairs below the limit, at most 2016 for 64 hosts, and `h - 1` above it.
/// Mirror networks of any size are found either way; below the limit every two mirrors
/// are also compared directly. Not measured on a crawl yet: a bound on work chosen by that
/// arithmetic.
pub const DEFAULT_MAX_CLUSTER_HOSTS: usize = 64;

/// The thresholds of mirror detection.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MirrorParams {
    pub min_paths: u64,
    pub min_share: f64,
    pub max_cluster_hosts: usize,
}

impl Default for MirrorParams {
    fn default() -> Self {
        MirrorParams {
            min_paths: DEFAULT_MIN_PATHS,
            min_share: DEFAULT_MIN_SHARE,
            max_cluster_hosts: DEFAULT_MAX_CLUSTER_HOSTS,
        }
    }
}

/// One document as mirror detection sees it: where it is and what content cluster it is in.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct Page {
    pub host: String,
    /// The path with the query (`/a/b.html?x=1`), of the normalized URL.
    pub path: String,
    /// The content cluster (near and exact duplicates together).
    pub cluster: u64,
    /// The exact-duplicate key: equal keys are identical content.
    pub exact: u128,
}

impl Page {
    pub fn new(host: &str, path: &str, cluster: u64, exact: u128) -> Page {
        Page {
            host: host.into(),
            path: path.into(),
            cluster,
            exact,
        }
    }
}

/// What two copies of one page on different hosts support: `host_a < host_b`.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct Link {
    pub key: MirrorKey,
    /// The shared path relative to the prefixes.
    pub rel: String,
    /// The two copies have the same exact-duplicate key.
    pub identical: bool,
}

/// A candidate mirror relation: `host_a/prefix_a/p` is `host_b/prefix_b/p`.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct MirrorKey {
    pub host_a: String,
    pub prefix_a: String,
    pub host_b: String,
    pub prefix_b: String,
}

/// The shared paths of one [`MirrorKey`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LinkCount {
    pub shared_paths: u64,
    pub identical_paths: u64,
}

/// Mirror or partial mirror (see the module docs).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum Verdict {
    Mirror,
    Partial,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Mirror => "mirror",
            Verdict::Partial => "partial",
        }
    }
}

/// One reported mirror relation: a row of `mirrors/`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Mirror {
    pub host_a: String,
    pub prefix_a: String,
    pub host_b: String,
    pub prefix_b: String,
    pub shared_paths: u64,
    /// Distinct paths of `host_a` under `prefix_a` (of all its documents with a URL).
    pub paths_a: u64,
    pub paths_b: u64,
    pub share_a: f64,
    pub share_b: f64,
    pub identical_paths: u64,
    pub near_paths: u64,
    pub verdict: Verdict,
}

/// Splits a path into its directory prefix and the rest at the longest common suffix of
/// path segments with `other`: `(prefix, rel)` with `path == prefix + rel`, the prefix
/// ending with `/`. `None` when even the last segments differ.
fn split_common_suffix<'p>(path: &'p str, other: &str) -> Option<(&'p str, &'p str, usize)> {
    let a: Vec<&str> = path.split('/').collect();
    let b: Vec<&str> = other.split('/').collect();
    // The first segment is the empty one before the leading `/`: never part of the suffix.
    let common = a
        .iter()
        .skip(1)
        .rev()
        .zip(b.iter().skip(1).rev())
        .take_while(|(x, y)| x == y)
        .count();
    if common == 0 {
        return None;
    }
    // Bytes of the first `a.len() - common` segments and their slashes.
    let keep = a.len() - common;
    let prefix_len: usize = a[..keep].iter().map(|s| s.len() + 1).sum();
    Some((&path[..prefix_len], &path[prefix_len..], prefix_len))
}

/// The links of one content cluster's pages (see [`cluster_links`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterLinks {
    /// Sorted, without repeats.
    pub links: Vec<Link>,
    /// The cluster lies on more than `max_hosts` hosts: only links to its anchor (the
    /// host with the smallest name) were made.
    pub star: bool,
    /// Pairs of places (a host and a path) compared: the work done. Each makes a link, so
    /// this is at most the number of links, whatever the pages that make none.
    pub compared: u64,
}

/// The copies of a cluster's page at one place, a host and a path.
struct Place<'p> {
    host: &'p str,
    path: &'p str,
    /// The last path segment: only places with the same one link.
    last: &'p str,
    /// The exact-duplicate keys of the copies, sorted, without repeats.
    exacts: Vec<u128>,
}

/// The last segment of a path (after its last `/`); none without a `/`, as such a path has
/// no segment a suffix can hold (see [`split_common_suffix`]).
fn last_segment(path: &str) -> Option<&str> {
    path.rsplit_once('/').map(|(_, last)| last)
}

/// The distinct places of `pages`, sorted by (last segment, host, path): the copies at one
/// place make the same links with any other place, so they are compared once.
fn places(pages: &[Page]) -> Vec<Place<'_>> {
    let mut sorted: Vec<(&str, &Page)> = pages
        .iter()
        .filter_map(|p| Some((last_segment(&p.path)?, p)))
        .collect();
    sorted.sort_unstable_by(|(la, a), (lb, b)| {
        (la, &a.host, &a.path, a.exact).cmp(&(lb, &b.host, &b.path, b.exact))
    });
    let mut out: Vec<Place> = Vec::new();
    for (last, p) in sorted {
        match out.last_mut() {
            Some(place) if place.host == p.host && place.path == p.path => {
                if place.exacts.last() != Some(&p.exact) {
                    place.exacts.push(p.exact);
                }
            }
            _ => out.push(Place {
                host: &p.host,
                path: &p.path,
                last,
                exacts: vec![p.exact],
            }),
        }
    }
    out
}

/// True if two sorted key lists share a key.
fn share_a_key(a: &[u128], b: &[u128]) -> bool {
    let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    small.iter().any(|k| large.binary_search(k).is_ok())
}

/// The links between the copies at two places with the same last segment, `a.host <
/// b.host`: one per value of `identical` that some pair of their copies gives.
fn link_places(a: &Place, b: &Place, links: &mut Vec<Link>) {
    let Some((prefix_a, rel, _)) = split_common_suffix(a.path, b.path) else {
        return;
    };
    let prefix_b = &b.path[..b.path.len() - rel.len()];
    let key = MirrorKey {
        host_a: a.host.into(),
        prefix_a: prefix_a.into(),
        host_b: b.host.into(),
        prefix_b: prefix_b.into(),
    };
    let same = share_a_key(&a.exacts, &b.exacts);
    // Some pair differs unless each side has one key, the same.
    let differ = !(same && a.exacts.len() == 1 && b.exacts.len() == 1);
    if differ {
        links.push(Link {
            key: key.clone(),
            rel: rel.into(),
            identical: false,
        });
    }
    if same {
        links.push(Link {
            key,
            rel: rel.into(),
            identical: true,
        });
    }
}

/// The links of one content cluster's pages (see the module docs): every two pages on
/// different hosts, or, when the cluster lies on more than `max_hosts` hosts, every page on
/// the anchor (the smallest host name) with every page elsewhere (the star rule).
///
/// Only copies with the same last path segment link, and copies at the same place link
/// alike, so the pages are sorted into distinct places by last segment and host, and only
/// places on different hosts within one last segment are compared: the work is a sort of
/// the pages and one comparison per link made (`compared`), never a pair of pages that
/// cannot link (a cluster of 100,000 pages on one host makes no comparison at all).
pub fn cluster_links(pages: &[Page], max_hosts: usize) -> ClusterLinks {
    let hosts: BTreeSet<&str> = pages.iter().map(|p| p.host.as_str()).collect();
    let anchor = match hosts.first() {
        Some(&first) if hosts.len() > max_hosts => Some(first),
        _ => None,
    };
    let places = places(pages);
    let mut made = ClusterLinks {
        star: anchor.is_some(),
        ..ClusterLinks::default()
    };
    for same_last in places.chunk_by(|a, b| a.last == b.last) {
        // Runs of one host, in host order: side a is always the earlier run.
        let runs: Vec<&[Place]> = same_last.chunk_by(|a, b| a.host == b.host).collect();
        for (i, run_a) in runs.iter().enumerate() {
            // In a star only the anchor links, and as the smallest host it is run 0.
            if anchor.is_some_and(|anchor| run_a[0].host != anchor) {
                break;
            }
            for run_b in &runs[i + 1..] {
                for a in run_a.iter() {
                    for b in run_b.iter() {
                        made.compared += 1;
                        link_places(a, b, &mut made.links);
                    }
                }
            }
        }
    }
    made.links.sort_unstable();
    made.links.dedup();
    made
}

/// Shared and identical paths per key, from every cluster's links (in any order, with
/// repeats: a path counts once, as identical if any of its links is).
pub fn count_links(links: impl IntoIterator<Item = Link>) -> BTreeMap<MirrorKey, LinkCount> {
    let mut by_path: BTreeMap<(MirrorKey, String), bool> = BTreeMap::new();
    for link in links {
        *by_path.entry((link.key, link.rel)).or_default() |= link.identical;
    }
    let mut counts: BTreeMap<MirrorKey, LinkCount> = BTreeMap::new();
    for ((key, _), identical) in by_path {
        let c = counts.entry(key).or_default();
        c.shared_paths += 1;
        c.identical_paths += u64::from(identical);
    }
    counts
}

/// Distinct paths under `prefix` in a host's sorted, deduplicated path list.
pub fn paths_under(sorted_paths: &[String], prefix: &str) -> u64 {
    let start = sorted_paths.partition_point(|p| p.as_str() < prefix);
    sorted_paths[start..]
        .iter()
        .take_while(|p| p.starts_with(prefix))
        .count() as u64
}

/// The row of a key whose counts pass the thresholds, or `None`.
pub fn verdict(
    key: MirrorKey,
    count: LinkCount,
    paths_a: u64,
    paths_b: u64,
    params: &MirrorParams,
) -> Option<Mirror> {
    if count.shared_paths < params.min_paths.max(1) {
        return None;
    }
    let share = |n: u64| count.shared_paths as f64 / n.max(1) as f64;
    let (share_a, share_b) = (share(paths_a), share(paths_b));
    let verdict = if share_a >= params.min_share && share_b >= params.min_share {
        Verdict::Mirror
    } else if share_a >= params.min_share || share_b >= params.min_share {
        Verdict::Partial
    } else {
        return None;
    };
    Some(Mirror {
        host_a: key.host_a,
        prefix_a: key.prefix_a,
        host_b: key.host_b,
        prefix_b: key.prefix_b,
        shared_paths: count.shared_paths,
        paths_a,
        paths_b,
        share_a,
        share_b,
        identical_paths: count.identical_paths,
        near_paths: count.shared_paths - count.identical_paths,
        verdict,
    })
}

/// Every mirror relation among `pages` (the whole algorithm in one place), sorted by key.
pub fn find_mirrors(pages: &[Page], params: &MirrorParams) -> Vec<Mirror> {
    let mut clusters: BTreeMap<u64, Vec<Page>> = BTreeMap::new();
    let mut host_paths: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for p in pages {
        clusters.entry(p.cluster).or_default().push(p.clone());
        host_paths
            .entry(p.host.as_str())
            .or_default()
            .insert(p.path.clone());
    }
    let host_paths: BTreeMap<&str, Vec<String>> = host_paths
        .into_iter()
        .map(|(h, set)| (h, set.into_iter().collect()))
        .collect();
    let links = clusters
        .values()
        .flat_map(|c| cluster_links(c, params.max_cluster_hosts).links);
    count_links(links)
        .into_iter()
        .filter_map(|(key, count)| {
            let paths_a = paths_under(&host_paths[key.host_a.as_str()], &key.prefix_a);
            let paths_b = paths_under(&host_paths[key.host_b.as_str()], &key.prefix_b);
            verdict(key, count, paths_a, paths_b, params)
        })
        .collect()
}

/// One host's row of `hosts/`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HostGroup {
    pub host: String,
    pub documents: u64,
    /// The canonical host of its mirror group (itself when it mirrors nothing).
    pub canonical_host: String,
    /// Hosts in its group (1 when it mirrors nothing).
    pub group_size: u64,
}

/// Mirror groups: hosts connected by `mirror` verdicts (not `partial`: a host that copies
/// one subtree of another is not a copy of it). The canonical host of a group is the one
/// with the most documents, then the smallest name. `hosts` is `(host, documents)`, each
/// host once; the rows come out sorted by host.
pub fn mirror_groups(hosts: &[(String, u64)], mirrors: &[Mirror]) -> Vec<HostGroup> {
    let index: BTreeMap<&str, usize> = hosts
        .iter()
        .enumerate()
        .map(|(i, (h, _))| (h.as_str(), i))
        .collect();
    let mut uf = crate::unionfind::UnionFind::new();
    for i in 0..hosts.len() {
        uf.union(i as u64, i as u64);
    }
    for m in mirrors.iter().filter(|m| m.verdict == Verdict::Mirror) {
        if let (Some(&a), Some(&b)) = (index.get(m.host_a.as_str()), index.get(m.host_b.as_str())) {
            uf.union(a as u64, b as u64);
        }
    }
    let mut members: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    for (doc, root) in uf.components_by_min() {
        members.entry(root).or_default().push(doc as usize);
    }
    let mut rows = Vec::with_capacity(hosts.len());
    for group in members.values() {
        let canonical = group
            .iter()
            .map(|&i| &hosts[i])
            .min_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)))
            .expect("a group has a member");
        for &i in group {
            rows.push(HostGroup {
                host: hosts[i].0.clone(),
                documents: hosts[i].1,
                canonical_host: canonical.0.clone(),
                group_size: group.len() as u64,
            });
        }
    }
    rows.sort_by(|a, b| a.host.cmp(&b.host));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn common_suffix_gives_the_prefixes() {
        assert_eq!(
            split_common_suffix("/docs/2.4/x.html", "/apache/docs/2.4/x.html"),
            Some(("/", "docs/2.4/x.html", 1))
        );
        assert_eq!(
            split_common_suffix("/apache/docs/x.html", "/docs/x.html"),
            Some(("/apache/", "docs/x.html", 8))
        );
        assert_eq!(
            split_common_suffix("/a/x.html", "/a/x.html"),
            Some(("/", "a/x.html", 1))
        );
        assert_eq!(split_common_suffix("/a/x.html", "/a/y.html"), None);
        assert_eq!(split_common_suffix("/", "/"), Some(("/", "", 1)));
        assert_eq!(split_common_suffix("/a/", "/b/"), Some(("/a/", "", 3)));
    }

    fn site(
        host: &str,
        prefix: &str,
        names: &[&str],
        cluster_base: u64,
        exact_base: u128,
    ) -> Vec<Page> {
        names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                Page::new(
                    host,
                    &format!("{prefix}{n}"),
                    cluster_base + i as u64,
                    exact_base + i as u128,
                )
            })
            .collect()
    }

    const NAMES: [&str; 8] = [
        "a.html", "b.html", "c/d.html", "c/e.html", "f", "g?x=1", "h/", "i.txt",
    ];

    #[test]
    fn full_partial_and_near_mirrors() {
        let mut pages = site("origin.org", "/", &NAMES, 0, 0);
        // A full mirror under a prefix, identical.
        pages.extend(site("mirror.net", "/pub/origin/", &NAMES, 0, 0));
        // A near mirror: same clusters, other exact keys (an inserted advertisement line).
        pages.extend(site("ads.com", "/", &NAMES, 0, 100));
        // A partial mirror: one subtree of 5 pages, and two pages of its own.
        let sub = ["p1", "p2", "p3", "p4", "p5"];
        pages.extend(site("origin.org", "/sub/", &sub, 50, 50));
        pages.extend(site("part.io", "/sub/", &sub, 50, 50));
        pages.extend(site("part.io", "/own/", &NAMES[..2], 200, 200));
        let mirrors = find_mirrors(&pages, &MirrorParams::default());
        type Row<'a> = (
            &'a str,
            &'a str,
            &'a str,
            &'a str,
            u64,
            u64,
            u64,
            u64,
            Verdict,
        );
        let rows: Vec<Row> = mirrors
            .iter()
            .map(|m| {
                (
                    m.host_a.as_str(),
                    m.prefix_a.as_str(),
                    m.host_b.as_str(),
                    m.prefix_b.as_str(),
                    m.shared_paths,
                    m.paths_a,
                    m.paths_b,
                    m.identical_paths,
                    m.verdict,
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                (
                    "ads.com",
                    "/",
                    "mirror.net",
                    "/pub/origin/",
                    8,
                    8,
                    8,
                    0,
                    Verdict::Mirror
                ),
                (
                    "ads.com",
                    "/",
                    "origin.org",
                    "/",
                    8,
                    8,
                    13,
                    0,
                    Verdict::Mirror
                ),
                (
                    "mirror.net",
                    "/pub/origin/",
                    "origin.org",
                    "/",
                    8,
                    8,
                    13,
                    8,
                    Verdict::Mirror
                ),
                (
                    "origin.org",
                    "/",
                    "part.io",
                    "/",
                    5,
                    13,
                    7,
                    5,
                    Verdict::Partial
                ),
            ]
        );
        let hosts: Vec<(String, u64)> = [
            ("ads.com", 8),
            ("mirror.net", 8),
            ("origin.org", 13),
            ("part.io", 7),
        ]
        .iter()
        .map(|(h, n)| (h.to_string(), *n))
        .collect();
        let groups = mirror_groups(&hosts, &mirrors);
        let canon: Vec<(&str, &str, u64)> = groups
            .iter()
            .map(|g| (g.host.as_str(), g.canonical_host.as_str(), g.group_size))
            .collect();
        assert_eq!(
            canon,
            [
                ("ads.com", "origin.org", 3),
                ("mirror.net", "origin.org", 3),
                ("origin.org", "origin.org", 3),
                ("part.io", "part.io", 1),
            ]
        );
    }

    #[test]
    fn boilerplate_does_not_make_mirrors() {
        // 100 unrelated hosts share robots.txt, a 404 page and a parked template, and each
        // has pages of its own.
        let mut pages = Vec::new();
        for h in 0..100u64 {
            let host = format!("site{h}.com");
            pages.push(Page::new(&host, "/robots.txt", 1, 1));
            pages.push(Page::new(&host, "/", 2, 2));
            pages.push(Page::new(&host, &format!("/missing-{h}"), 3, 3));
            for i in 0..5 {
                pages.push(Page::new(
                    &host,
                    &format!("/p{i}"),
                    1000 + h * 10 + i,
                    (1000 + h * 10 + i) as u128,
                ));
            }
        }
        assert!(find_mirrors(&pages, &MirrorParams::default()).is_empty());
        // Among few hosts the shared boilerplate is below min_paths.
        assert!(find_mirrors(&pages[..24], &MirrorParams::default()).is_empty());
        // With loose thresholds, a few hosts (under the host limit) pair on robots.txt and
        // "/" (2 of 8 paths) every two of them; a hundred follow the star rule, and pair
        // only with the anchor, site0.com.
        let loose = MirrorParams {
            min_paths: 1,
            min_share: 0.1,
            ..Default::default()
        };
        let few = find_mirrors(&pages[..24], &loose);
        assert_eq!(few.len(), 3, "{few:?}");
        assert!(few.iter().all(|m| m.shared_paths == 2 && m.paths_a == 8));
        let many = find_mirrors(&pages, &loose);
        assert_eq!(many.len(), 99, "{:?}", &many[..3.min(many.len())]);
        assert!(many
            .iter()
            .all(|m| m.host_a == "site0.com" && m.shared_paths == 2 && m.paths_b == 8));
        let robots: Vec<Page> = pages.iter().filter(|p| p.cluster == 1).cloned().collect();
        let star = cluster_links(&robots, DEFAULT_MAX_CLUSTER_HOSTS);
        assert!(star.star);
        assert_eq!(star.links.len(), 99, "h - 1 links, not h(h-1)/2");
        let all = cluster_links(&robots, 100);
        assert!(!all.star);
        assert_eq!(all.links.len(), 100 * 99 / 2);
    }

    /// Issue 39, case 8: a cluster of many pages on one host (a soft-404 page served at every
    /// path, or one page captured again and again) compared every two of its pages, though
    /// pages on one host never link: 100,000 of them cost 5 * 10^9 comparisons. The work is
    /// now the links made, whatever the pages that make none.
    #[test]
    fn a_large_cluster_costs_the_links_it_makes_not_its_pages_squared() {
        let mut pages: Vec<Page> = (0..10_000)
            .map(|i| Page::new("one.example", &format!("/p{i}"), 7, 1))
            .collect();
        pages.extend((0..2_000).map(|_| Page::new("one.example", "/missing", 7, 1)));
        for host in ["b.example", "c.example", "d.example"] {
            pages.push(Page::new(host, "/p0", 7, 1));
            pages.push(Page::new(host, "/x/missing", 7, 2));
        }
        let made = cluster_links(&pages, DEFAULT_MAX_CLUSTER_HOSTS);
        let link = |ha: &str, pa: &str, hb: &str, pb: &str, rel: &str, identical| Link {
            key: MirrorKey {
                host_a: ha.into(),
                prefix_a: pa.into(),
                host_b: hb.into(),
                prefix_b: pb.into(),
            },
            rel: rel.into(),
            identical,
        };
        let mut want = Vec::new();
        let hosts = ["b.example", "c.example", "d.example", "one.example"];
        for (i, a) in hosts.iter().enumerate() {
            for b in &hosts[i + 1..] {
                want.push(link(a, "/", b, "/", "p0", true));
                if *b == "one.example" {
                    // 2,000 copies of /missing, all exact key 1: one link, not identical.
                    want.push(link(a, "/x/", b, "/", "missing", false));
                } else {
                    want.push(link(a, "/", b, "/", "x/missing", true));
                }
            }
        }
        want.sort();
        assert_eq!(made.links, want);
        assert!(!made.star);
        // Each pair of places compared makes a link: 12, not 72 million.
        assert_eq!(made.compared, 12);
    }

    /// The links of every two pages of a cluster on different hosts, compared directly (the
    /// star rule: only pairs whose smaller host is the cluster's smallest): the oracle of
    /// [`cluster_links`], which compares only places that can link.
    fn brute_cluster_links(pages: &[Page], max_hosts: usize) -> Vec<Link> {
        let hosts: BTreeSet<&str> = pages.iter().map(|p| p.host.as_str()).collect();
        let star = hosts.len() > max_hosts;
        let mut links = BTreeSet::new();
        for p in pages {
            for q in pages {
                if p.host >= q.host || (star && hosts.first() != Some(&p.host.as_str())) {
                    continue;
                }
                if let Some((prefix_a, rel, _)) = split_common_suffix(&p.path, &q.path) {
                    links.insert(Link {
                        key: MirrorKey {
                            host_a: p.host.clone(),
                            prefix_a: prefix_a.into(),
                            host_b: q.host.clone(),
                            prefix_b: q.path[..q.path.len() - rel.len()].into(),
                        },
                        rel: rel.into(),
                        identical: p.exact == q.exact,
                    });
                }
            }
        }
        links.into_iter().collect()
    }

    /// Pages of one cluster, with repeats (captures of one URL, with the same or other
    /// content), paths without a leading `/`, and few hosts so that places pair often.
    fn cluster_strategy() -> impl Strategy<Value = Vec<Page>> {
        let page = (
            prop::sample::select(vec!["a.org", "b.org", "c.net", "d.com", "e.io"]),
            prop::sample::select(vec!["/", "", "/x/", "x/"]),
            prop::collection::vec(prop::sample::select(vec!["x", "y", "p.html", ""]), 0..3),
            0u128..3,
        )
            .prop_map(|(host, lead, segs, exact)| {
                Page::new(host, &format!("{lead}{}", segs.join("/")), 0, exact)
            });
        prop::collection::vec(page, 0..40)
    }

    proptest! {
        #[test]
        fn cluster_links_match_every_pair_compared(
            pages in cluster_strategy(),
            max_hosts in 1usize..6,
        ) {
            let made = cluster_links(&pages, max_hosts);
            prop_assert_eq!(&made.links, &brute_cluster_links(&pages, max_hosts));
            let hosts: BTreeSet<&str> = pages.iter().map(|p| p.host.as_str()).collect();
            prop_assert_eq!(made.star, hosts.len() > max_hosts);
            // Every comparison makes a link (one or two: identical and not).
            prop_assert!(made.compared <= made.links.len() as u64);
        }
    }

    /// `n` mirrors of www.apache.org under `/pub/apache/`, each holding the 12 pages of the
    /// origin, which has 3 more of its own.
    fn apache_network(n: usize) -> (Vec<Page>, Vec<(String, u64)>) {
        let names: Vec<String> = (0..12).map(|i| format!("dist/p{i}.html")).collect();
        let mut pages = Vec::new();
        let mut hosts = Vec::new();
        for (i, name) in names.iter().enumerate() {
            pages.push(Page::new(
                "www.apache.org",
                &format!("/{name}"),
                i as u64,
                0,
            ));
        }
        for own in 0..3u64 {
            pages.push(Page::new(
                "www.apache.org",
                &format!("/own{own}"),
                100 + own,
                0,
            ));
        }
        hosts.push(("www.apache.org".to_string(), 15));
        for m in 0..n {
            let host = format!("apache.mirror{m:03}.net");
            for (i, name) in names.iter().enumerate() {
                pages.push(Page::new(
                    &host,
                    &format!("/pub/apache/{name}"),
                    i as u64,
                    0,
                ));
            }
            hosts.push((host, 12));
        }
        hosts.sort();
        (pages, hosts)
    }

    #[test]
    fn a_network_of_281_mirrors_is_one_group() {
        // The issue's example: 281 hosts (the origin and 280 mirrors), far over the host
        // limit, so every cluster is a star around the same anchor.
        let (pages, hosts) = apache_network(280);
        let mirrors = find_mirrors(&pages, &MirrorParams::default());
        assert_eq!(mirrors.len(), 280);
        let anchor = "apache.mirror000.net";
        assert!(mirrors
            .iter()
            .all(|m| m.host_a == anchor && m.verdict == Verdict::Mirror && m.shared_paths == 12));
        let origin = mirrors
            .iter()
            .find(|m| m.host_b == "www.apache.org")
            .expect("the origin against the anchor");
        assert_eq!(
            (origin.prefix_a.as_str(), origin.prefix_b.as_str()),
            ("/pub/apache/", "/")
        );
        assert_eq!((origin.paths_a, origin.paths_b), (12, 15));
        let groups = mirror_groups(&hosts, &mirrors);
        assert_eq!(groups.len(), 281);
        assert!(groups
            .iter()
            .all(|g| g.group_size == 281 && g.canonical_host == "www.apache.org"));
        // Under the limit every two of them are compared: 10 mirrors and the origin give
        // all 55 pairs, 45 of them between mirrors.
        let (pages, hosts) = apache_network(10);
        let mirrors = find_mirrors(&pages, &MirrorParams::default());
        assert_eq!(mirrors.len(), 55);
        let between = mirrors
            .iter()
            .filter(|m| m.host_b != "www.apache.org")
            .count();
        assert_eq!(between, 45);
        let groups = mirror_groups(&hosts, &mirrors);
        assert!(groups
            .iter()
            .all(|g| g.group_size == 11 && g.canonical_host == "www.apache.org"));
    }

    /// The oracle: every pair of pages of all pages, compared directly, no grouping by
    /// cluster; prefixes by reversing segment lists; paths under a prefix by scanning. A
    /// cluster over the host limit links only pairs whose smaller host is the smallest of
    /// the cluster (the star rule).
    fn oracle(pages: &[Page], params: &MirrorParams) -> Vec<Mirror> {
        // The hosts of a cluster; over the limit only its smallest (the anchor) links.
        let hosts_of = |cluster: u64| {
            pages
                .iter()
                .filter(|p| p.cluster == cluster)
                .map(|p| p.host.clone())
                .collect::<BTreeSet<_>>()
        };
        let may_link = |p: &Page| {
            let hosts = hosts_of(p.cluster);
            hosts.len() <= params.max_cluster_hosts || hosts.first() == Some(&p.host)
        };
        let mut support: BTreeMap<(String, String, String, String), BTreeMap<String, bool>> =
            BTreeMap::new();
        for p in pages {
            for q in pages {
                if p.host >= q.host || p.cluster != q.cluster || !may_link(p) {
                    continue;
                }
                let mut sa: Vec<&str> = p.path.split('/').skip(1).collect();
                let mut sb: Vec<&str> = q.path.split('/').skip(1).collect();
                let mut rel = Vec::new();
                while let (Some(x), Some(y)) = (sa.last(), sb.last()) {
                    if x != y {
                        break;
                    }
                    rel.insert(0, *x);
                    sa.pop();
                    sb.pop();
                }
                if rel.is_empty() {
                    continue;
                }
                let prefix = |s: &[&str]| {
                    let mut out = String::from("/");
                    for seg in s {
                        out.push_str(seg);
                        out.push('/');
                    }
                    out
                };
                let key = (p.host.clone(), prefix(&sa), q.host.clone(), prefix(&sb));
                *support
                    .entry(key)
                    .or_default()
                    .entry(rel.join("/"))
                    .or_default() |= p.exact == q.exact;
            }
        }
        let count_under = |host: &str, prefix: &str| {
            pages
                .iter()
                .filter(|p| p.host == host && p.path.starts_with(prefix))
                .map(|p| p.path.clone())
                .collect::<BTreeSet<_>>()
                .len() as u64
        };
        let mut out = Vec::new();
        for ((ha, pa, hb, pb), rels) in support {
            let shared = rels.len() as u64;
            let identical = rels.values().filter(|&&i| i).count() as u64;
            let (na, nb) = (count_under(&ha, &pa), count_under(&hb, &pb));
            let (sa, sb) = (shared as f64 / na as f64, shared as f64 / nb as f64);
            if shared < params.min_paths {
                continue;
            }
            let verdict = match (sa >= params.min_share, sb >= params.min_share) {
                (true, true) => Verdict::Mirror,
                (false, false) => continue,
                _ => Verdict::Partial,
            };
            out.push(Mirror {
                host_a: ha,
                prefix_a: pa,
                host_b: hb,
                prefix_b: pb,
                shared_paths: shared,
                paths_a: na,
                paths_b: nb,
                share_a: sa,
                share_b: sb,
                identical_paths: identical,
                near_paths: shared - identical,
                verdict,
            });
        }
        out
    }

    fn page_strategy() -> impl Strategy<Value = Page> {
        (
            prop::sample::select(vec!["a.org", "b.org", "c.net", "d.com"]),
            prop::collection::vec(
                prop::sample::select(vec!["x", "y", "z", "p.html", ""]),
                1..4,
            ),
            0u64..6,
            0u128..3,
        )
            .prop_map(|(host, segs, cluster, exact)| {
                Page::new(host, &format!("/{}", segs.join("/")), cluster, exact)
            })
    }

    proptest! {
        #[test]
        fn find_mirrors_matches_the_brute_force_oracle(
            pages in prop::collection::vec(page_strategy(), 0..40),
            min_paths in 1u64..4,
            min_share in prop::sample::select(vec![0.2, 0.5, 0.9]),
            max_cluster_hosts in 2usize..5,
        ) {
            let params = MirrorParams { min_paths, min_share, max_cluster_hosts };
            prop_assert_eq!(find_mirrors(&pages, &params), oracle(&pages, &params));
        }
    }
}
