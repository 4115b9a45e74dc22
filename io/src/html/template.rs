//! Site templates: the blocks of text that repeat on many pages of one host.
//!
//! Per-page rules ([`super::main_content`]) guess a page's boilerplate from its markup, and
//! every theme they guess wrong makes the pages of a site look alike. The pages of one site
//! say which blocks are its template: the menu, the sidebar, the footer and the licence
//! notice repeat, word for word, on page after page, while a page's own text does not.
//!
//! A run learns them before it fingerprints (`dataflow`'s templates stage):
//!
//! 1. every page is read once in `text` mode; each of its lines (a block: the text between
//!    two block boundaries, see [`super::text`]) is hashed ([`block_hash`]), and the page
//!    says which distinct blocks it holds, under its host ([`host_key`]), its URL and its
//!    content;
//! 2. for each host, the pages holding each block are counted twice: distinct URLs
//!    (captures of one URL count once) and distinct contents (one page under many URLs
//!    counts once). A block is part of the host's template when both counts reach
//!    [`template_floor`]: at least [`TEMPLATE_MIN_PAGES`] pages, and at least
//!    [`TEMPLATE_SHARE_PCT`] percent of the host's distinct URLs ([`TemplateCounts`] walks
//!    the sorted counts);
//! 3. `main` mode then drops every line of a page whose hash is in its host's template
//!    ([`SiteTemplates::host`]), in the main text and in the fallback alike.
//!
//! The simple version counts every `(host, block)` pair in a hash map of sets; the stage
//! sorts `(host, block, kind, key)` records instead (on local disk beyond its budget), so
//! that the counts come out one group after another in constant memory, and only the
//! templates, a few dozen blocks per host, are held.
//!
//! ```
//! use neardup_io::html::template::{block_hash, host_key, SiteTemplates, TemplateCounts};
//!
//! let host = host_key("docs.example.org");
//! let menu = block_hash("Home Download Documentation Community");
//! // The host has 40 distinct pages; the menu is on all of them, a quote on 3.
//! let mut counts = TemplateCounts::default();
//! counts.host_pages(host, 40);
//! assert!(counts.block(host, 40, 40));
//! assert!(!counts.block(host, 3, 3));
//! let templates = SiteTemplates::from_pairs(vec![(host, menu)]);
//! assert!(templates.host(host).contains(menu));
//! assert!(templates.host(host_key("other.example")).is_empty());
//! ```

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// A block is never part of a template unless at least this many distinct pages of its
/// host hold it (by URL and by content): hosts of fewer pages keep the per-page rules only,
/// and a page found under a few URLs, or a passage quoted on a few pages, is never taken
/// for a template. Measured on the site benchmark (docs/inputs.md, "Site templates").
pub const TEMPLATE_MIN_PAGES: u64 = 5;

/// A block is part of its host's template when at least this percentage of the host's
/// distinct URLs hold it (and [`TEMPLATE_MIN_PAGES`]). Menus, sidebars and footers are on
/// nearly every page; 10% also takes the navigation of a site's larger sections. Measured
/// on the site benchmark (docs/inputs.md, "Site templates").
pub const TEMPLATE_SHARE_PCT: u64 = 10;

/// Seeds that keep the three hashes apart (a block's text never collides with a host's by
/// construction).
const BLOCK_SEED: u64 = 0x7465_6d70_6c61_7465;
const HOST_SEED: u64 = 0x686f_7374_6b65_7973;
const PAGE_SEED: u64 = 0x7061_6765_6b65_7973;

/// The hash of one block (one line of extracted text, whitespace already collapsed), never
/// 0 ([`PAGE_MARKER`] is).
pub fn block_hash(line: &str) -> u64 {
    xxh3_64_with_seed(line.as_bytes(), BLOCK_SEED).max(1)
}

/// The block value the counting records use for "this page exists": sorted first in its
/// host, so the host's page count is known before any of its blocks.
pub const PAGE_MARKER: u64 = 0;

/// The host of a URL (lower-cased by the URL parser), or `None` if it does not parse or
/// has none.
pub fn host_of(url: &str) -> Option<String> {
    url::Url::parse(url.trim())
        .ok()?
        .host_str()
        .map(str::to_owned)
}

/// The key of a host (as [`host_of`] gives it: lower-cased).
pub fn host_key(host: &str) -> u64 {
    xxh3_64_with_seed(host.as_bytes(), HOST_SEED)
}

/// The key of a page's URL or of its content.
pub fn page_key(bytes: &[u8]) -> u64 {
    xxh3_64_with_seed(bytes, PAGE_SEED)
}

/// The fewest distinct pages (by URL and by content) that make a block of a host with
/// `host_pages` distinct URLs a template block: [`TEMPLATE_MIN_PAGES`], or
/// [`TEMPLATE_SHARE_PCT`] percent of the host's pages if more.
pub fn template_floor(host_pages: u64) -> u64 {
    TEMPLATE_MIN_PAGES.max((host_pages * TEMPLATE_SHARE_PCT).div_ceil(100))
}

/// The distinct blocks of a page's `text`-mode text, sorted: what a page contributes to the
/// counts.
pub fn page_blocks(text: &str, out: &mut Vec<u64>) {
    out.clear();
    out.extend(text.lines().filter(|l| !l.is_empty()).map(block_hash));
    out.sort_unstable();
    out.dedup();
}

/// The decision, walked over the sorted counts: a host's page count first, then each of
/// its blocks with the distinct URLs and contents holding it.
#[derive(Debug, Default)]
pub struct TemplateCounts {
    host: Option<(u64, u64)>,
}

impl TemplateCounts {
    /// The host `host` has `pages` distinct URLs.
    pub fn host_pages(&mut self, host: u64, pages: u64) {
        self.host = Some((host, pages));
    }

    /// Whether a block of `host` held by `urls` distinct URLs and `contents` distinct
    /// contents is a template block. A host whose page count was not given has none.
    pub fn block(&self, host: u64, urls: u64, contents: u64) -> bool {
        match self.host {
            Some((h, pages)) if h == host => urls.min(contents) >= template_floor(pages),
            _ => false,
        }
    }
}

/// The templates of every host: for each host key, its template blocks, sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SiteTemplates {
    hosts: HashMap<u64, Box<[u64]>>,
    blocks: usize,
}

impl SiteTemplates {
    /// The templates of `(host, block)` pairs, in any order (duplicates ignored).
    pub fn from_pairs(mut pairs: Vec<(u64, u64)>) -> Self {
        pairs.sort_unstable();
        pairs.dedup();
        let blocks = pairs.len();
        let mut hosts: HashMap<u64, Box<[u64]>> = HashMap::new();
        for group in pairs.chunk_by(|a, b| a.0 == b.0) {
            hosts.insert(group[0].0, group.iter().map(|&(_, b)| b).collect());
        }
        SiteTemplates { hosts, blocks }
    }

    /// The template of one host (empty if it has none).
    pub fn host(&self, host: u64) -> HostTemplate<'_> {
        HostTemplate(self.hosts.get(&host).map_or(&[], |b| b))
    }

    /// The template of the host of `url` (empty if the URL has no host).
    pub fn of_url(&self, url: Option<&str>) -> HostTemplate<'_> {
        match url.and_then(host_of) {
            Some(host) if !self.hosts.is_empty() => self.host(host_key(&host)),
            _ => HostTemplate::NONE,
        }
    }

    /// Hosts that have a template.
    pub fn hosts(&self) -> usize {
        self.hosts.len()
    }

    /// Template blocks, over every host.
    pub fn blocks(&self) -> usize {
        self.blocks
    }
}

/// Site templates shared by every reader of a run: cheap to clone, and comparable and
/// hashable as the reading fields that carry them need (by content).
#[derive(Debug, Clone)]
pub struct SharedTemplates(pub Arc<SiteTemplates>);

impl PartialEq for SharedTemplates {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0 == other.0
    }
}

impl Eq for SharedTemplates {}

impl Hash for SharedTemplates {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self.0.hosts(), self.0.blocks()).hash(state);
    }
}

impl std::ops::Deref for SharedTemplates {
    type Target = SiteTemplates;

    fn deref(&self) -> &SiteTemplates {
        &self.0
    }
}

/// One host's template blocks: what the extractor drops.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostTemplate<'t>(&'t [u64]);

impl HostTemplate<'_> {
    /// No template: nothing is dropped.
    pub const NONE: HostTemplate<'static> = HostTemplate(&[]);

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the block of hash `block` is part of the template.
    pub fn contains(&self, block: u64) -> bool {
        self.0.binary_search(&block).is_ok()
    }

    /// Whether the line `line` is part of the template.
    pub fn holds_line(&self, line: &str) -> bool {
        !self.0.is_empty() && self.contains(block_hash(line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_grows_with_the_host_past_the_minimum() {
        assert_eq!(template_floor(1), TEMPLATE_MIN_PAGES);
        assert_eq!(template_floor(50), TEMPLATE_MIN_PAGES);
        assert_eq!(template_floor(51), 6);
        assert_eq!(template_floor(3185), 319);
    }

    #[test]
    fn a_block_needs_distinct_urls_and_distinct_contents() {
        let mut counts = TemplateCounts::default();
        let host = host_key("a.example");
        counts.host_pages(host, 20);
        // One page under 20 URLs: a single content.
        assert!(!counts.block(host, 20, 1));
        // 20 captures of one URL: a single URL.
        assert!(!counts.block(host, 1, 20));
        assert!(counts.block(host, 5, 5));
        assert!(!counts.block(host, 4, 5));
        // Another host's counts never apply.
        assert!(!counts.block(host_key("b.example"), 20, 20));
    }

    #[test]
    fn page_blocks_are_distinct_and_sorted() {
        let mut out = vec![99];
        page_blocks("a b\n\nc d\na b", &mut out);
        let mut expected = vec![block_hash("a b"), block_hash("c d")];
        expected.sort_unstable();
        assert_eq!(out, expected);
        assert!(out.iter().all(|&b| b != PAGE_MARKER));
    }

    #[test]
    fn templates_by_host_and_url() {
        let (a, b) = (host_key("a.example"), host_key("b.example"));
        let t = SiteTemplates::from_pairs(vec![(a, 3), (b, 1), (a, 2), (a, 3)]);
        assert_eq!((t.hosts(), t.blocks()), (2, 3));
        assert!(t.host(a).contains(2) && t.host(a).contains(3) && !t.host(a).contains(1));
        let line = "Copyright the authors of this site";
        let t = SiteTemplates::from_pairs(vec![(a, block_hash(line))]);
        assert!(t.of_url(Some("http://A.example/x?y")).holds_line(line));
        assert!(!t.of_url(Some("http://b.example/x")).holds_line(line));
        assert!(!t.of_url(None).holds_line(line));
    }
}
