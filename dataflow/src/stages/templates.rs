//! The templates stage: each host's site template, learned from the crawl before any page
//! is fingerprinted (`--html main`, inputs with URLs; see [`neardup_io::html::template`]).
//!
//! The simple version: every page read in `text` mode; for each host, a map from each of
//! its blocks to the set of the host's URLs holding it and the set of contents holding it;
//! a block is a template block when both sets reach the host's floor. This stage computes
//! the same without holding the sets:
//!
//! 1. each worker reads its own units in `text` mode and, for each page with a URL, gives
//!    `(host, PAGE_MARKER, url)` and, for each distinct block of the page,
//!    `(host, block, url)` and `(host, block, content)` (the kind in the key's top bit);
//! 2. the records meet at the host's worker and are sorted there (an external sort, within
//!    [`TEMPLATES_SORT_SHARE`] of the worker's part of `--memory-limit`);
//! 3. walking them in order, each `(host, block)` group counts its distinct URLs and
//!    distinct contents (equal keys are adjacent), and the host's page count comes first
//!    (the marker sorts before every block), so each block is decided as its group ends;
//! 4. every worker receives every template block, and the same [`SiteTemplates`].
//!
//! The pass reads the corpus once more (a second HTML parse of every page); its readers
//! count nothing and show no progress.

use std::cell::RefCell;
use std::rc::Rc;

use neardup_core::urlnorm::normalize_url;
use neardup_io::html::template::{
    host_key, page_blocks, page_key, SiteTemplates, TemplateCounts, PAGE_MARKER,
};
use neardup_io::html::HtmlMode;
use neardup_io::record::{host_of, Record};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::Probe;
use timely::dataflow::ProbeHandle;
use timely::worker::Worker;

use crate::config::JobInput;
use crate::operators::SortComplete;
use crate::records::{RawBody, RawDoc};
use crate::stages::read::read_units_as;
use crate::worker::WorkerCtx;

/// The share of a worker's part of `--memory-limit` that the stage's sort keeps in memory
/// (the stage runs alone, before the main dataflow).
pub const TEMPLATES_SORT_SHARE: f64 = 0.5;

/// The key's top bit: 0 for a URL's key, 1 for a content's.
const CONTENT_BIT: u64 = 1 << 63;

/// One counting record: `(host, block, kind and key)`.
type Count = (u64, u64, u64);

/// Runs the stage on this worker and returns the templates every worker learns alike.
pub fn learn_templates(worker: &mut Worker, ctx: Rc<WorkerCtx>) -> SiteTemplates {
    let peers = worker.peers();
    let learned: Rc<RefCell<Vec<(u64, u64)>>> = Rc::default();
    let sink = learned.clone();
    let probe = ProbeHandle::new();
    let JobInput::Documents { fields, .. } = &ctx.shared.config.input else {
        return SiteTemplates::default();
    };
    let mut fields = fields.clone();
    fields.html = Some(HtmlMode::Text);
    fields.templates = None;
    worker.dataflow::<u64, _, _>(|scope| {
        let raw = read_units_as(scope, ctx.clone(), probe.clone(), Some(fields.clone()));
        let parsing = ctx.clone();
        let counts = raw
            .unary::<CapacityContainerBuilder<Vec<Count>>, _, _, _>(
                Pipeline,
                "TemplateBlocks",
                move |_, _| {
                    let mut blocks = Vec::new();
                    let mut record = Record::default();
                    move |input, output| {
                        input.for_each(|cap, data| {
                            let mut session = output.session(&cap);
                            for doc in data.drain(..) {
                                let Some(page) = page_of(doc, &parsing, &fields, &mut record)
                                else {
                                    continue;
                                };
                                page_blocks(&page.text, &mut blocks);
                                session.give_iterator(page.counts(&blocks));
                            }
                        });
                    }
                },
            )
            .probe_with(&probe);
        let (end_ctx, fail_ctx) = (ctx.clone(), ctx.clone());
        let (templates, _) = counts.sort_complete_split::<Count, (usize, u64, u64), (), _, _>(
            Exchange::new(ctx.meter("templates", |&(host, _, _): &Count| host)),
            "CountTemplates",
            ctx.sort::<Count>("templates", TEMPLATES_SORT_SHARE),
            Walk::default(),
            |_, _| {},
            move |walk, record, out, _| {
                if let Some(template) = walk.next(record) {
                    // Every worker gets every template block.
                    out.give_iterator((0..peers).map(|to| (to, template.0, template.1)));
                }
            },
            move |mut walk, stats, out, _| {
                end_ctx.sorted("templates", stats);
                if let Some(template) = walk.close() {
                    out.give_iterator((0..peers).map(|to| (to, template.0, template.1)));
                }
            },
            move |e| fail_ctx.sort_failed("templates", e),
        );
        templates.sink(
            Exchange::new(ctx.meter("templates", |&(to, _, _): &(usize, u64, u64)| to as u64)),
            "CollectTemplates",
            move |(input, _)| {
                input.for_each(|_, data| {
                    sink.borrow_mut()
                        .extend(data.drain(..).map(|(_, host, block)| (host, block)));
                });
            },
        );
    });
    while worker.step_or_park(None) {}
    let templates = SiteTemplates::from_pairs(learned.take());
    ctx.stage_done("site templates");
    templates
}

/// A page as the stage counts it: its host, the keys of its URL and content, its text.
struct Page {
    host: u64,
    url: u64,
    content: u64,
    text: String,
}

impl Page {
    /// The page's counting records, given its distinct blocks.
    fn counts<'a>(&self, blocks: &'a [u64]) -> impl Iterator<Item = Count> + 'a {
        let (host, url, content) = (self.host, self.url >> 1, (self.content >> 1) | CONTENT_BIT);
        std::iter::once((host, PAGE_MARKER, url)).chain(
            blocks
                .iter()
                .flat_map(move |&b| [(host, b, url), (host, b, content)]),
        )
    }
}

/// A document read in `text` mode as a page to count: `None` for a record without a
/// URL with a host, without text, or that cannot be parsed (the main pass reports it).
fn page_of(
    doc: RawDoc,
    ctx: &WorkerCtx,
    fields: &neardup_io::record::FieldSpec,
    parsed: &mut Record,
) -> Option<Page> {
    let record = match doc.body {
        RawBody::Fields(record) => record,
        RawBody::Raw(line) => {
            let kind = ctx.shared.plan.files[doc.file as usize].format.kind();
            kind.parse_into(&line, fields, parsed).ok()?;
            std::mem::take(parsed)
        }
        RawBody::Fingerprint { .. } | RawBody::Invalid(_) => return None,
    };
    let url = record.origin.as_ref()?.url.as_deref()?;
    if record.text.is_empty() {
        return None;
    }
    let host = host_of(url)?;
    let normalized = normalize_url(url, ctx.shared.config.url_normalize);
    Some(Page {
        host: host_key(&host),
        url: page_key(normalized.as_deref().unwrap_or(url).as_bytes()),
        content: page_key(record.text.as_bytes()),
        text: record.text,
    })
}

/// The walk over one worker's sorted records: the group being counted and the decision.
#[derive(Default)]
struct Walk {
    counts: TemplateCounts,
    /// The `(host, block)` being counted, its last key, and its distinct URLs and contents.
    group: Option<(u64, u64)>,
    last: Option<u64>,
    urls: u64,
    contents: u64,
}

impl Walk {
    /// Takes the next record; returns the template block of the group it ended, if any.
    fn next(&mut self, (host, block, key): Count) -> Option<(u64, u64)> {
        let ended = if self.group != Some((host, block)) {
            let ended = self.close();
            self.group = Some((host, block));
            ended
        } else {
            None
        };
        if self.last != Some(key) {
            self.last = Some(key);
            match key & CONTENT_BIT {
                0 => self.urls += 1,
                _ => self.contents += 1,
            }
        }
        ended
    }

    /// Ends the group being counted: a host's page count, or a block's decision.
    fn close(&mut self) -> Option<(u64, u64)> {
        let (host, block) = self.group.take()?;
        let (urls, contents) = (self.urls, self.contents);
        (self.urls, self.contents, self.last) = (0, 0, None);
        if block == PAGE_MARKER {
            self.counts.host_pages(host, urls);
            return None;
        }
        self.counts
            .block(host, urls, contents)
            .then_some((host, block))
    }
}

/// The simple version, for tests: the templates of `(host, url, text)` pages from hash
/// maps of sets.
#[cfg(test)]
pub(crate) fn simple_templates(pages: &[(&str, &str, &str)]) -> SiteTemplates {
    use neardup_io::html::template::block_hash;
    use std::collections::{HashMap, HashSet};
    type Holders<'a> = (HashSet<&'a str>, HashSet<&'a str>);
    let mut hosts: HashMap<&str, (HashSet<&str>, HashMap<u64, Holders>)> = HashMap::new();
    for &(host, url, text) in pages {
        let (urls, blocks) = hosts.entry(host).or_default();
        urls.insert(url);
        for line in text.lines().filter(|l| !l.is_empty()) {
            let (by_url, by_content) = blocks.entry(block_hash(line)).or_default();
            by_url.insert(url);
            by_content.insert(text);
        }
    }
    let mut pairs = Vec::new();
    for (host, (urls, blocks)) in hosts {
        let floor = neardup_io::html::template::template_floor(urls.len() as u64);
        for (block, (by_url, by_content)) in blocks {
            if by_url.len().min(by_content.len()) as u64 >= floor {
                pairs.push((host_key(host), block));
            }
        }
    }
    SiteTemplates::from_pairs(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The walk over sorted records, as the stage does it, equals the simple version.
    fn walked(pages: &[(&str, &str, &str)]) -> SiteTemplates {
        let mut records = Vec::new();
        let mut blocks = Vec::new();
        for &(host, url, text) in pages {
            let page = Page {
                host: host_key(host),
                url: page_key(url.as_bytes()),
                content: page_key(text.as_bytes()),
                text: text.to_owned(),
            };
            page_blocks(&page.text, &mut blocks);
            records.extend(page.counts(&blocks));
        }
        records.sort_unstable();
        let mut walk = Walk::default();
        let mut pairs: Vec<(u64, u64)> = records.into_iter().filter_map(|r| walk.next(r)).collect();
        pairs.extend(walk.close());
        SiteTemplates::from_pairs(pairs)
    }

    #[test]
    fn the_walk_equals_the_simple_version() {
        let menu = "Home Docs Blog About";
        let footer = "Copyright the site";
        let mut pages = Vec::new();
        let urls: Vec<String> = (0..40).map(|i| format!("/page{i}")).collect();
        let texts: Vec<String> = (0..40)
            .map(|i| match i % 4 {
                0 => format!("{menu}\nPage {i} own words\n{footer}"),
                1 => format!("{menu}\nPage {i} own words\nsection line"),
                _ => format!("Page {i} own words\n{footer}"),
            })
            .collect();
        for i in 0..40 {
            pages.push(("a.example", urls[i].as_str(), texts[i].as_str()));
        }
        // One page under 12 URLs, and one URL captured 12 times: never a template.
        let same = "Same page under many URLs\nIts second line";
        let many: Vec<String> = (0..12).map(|i| format!("/same?s={i}")).collect();
        let captures: Vec<String> = (0..12)
            .map(|i| format!("Capture {i}\nA changing page"))
            .collect();
        for i in 0..12 {
            pages.push(("b.example", many[i].as_str(), same));
            pages.push(("b.example", "/news", captures[i].as_str()));
        }
        // A small host: below the floor.
        for i in 0..4 {
            pages.push(("c.example", urls[i].as_str(), texts[i].as_str()));
        }
        let simple = simple_templates(&pages);
        assert_eq!(walked(&pages), simple);
        let a = simple.host(host_key("a.example"));
        assert!(a.holds_line(menu) && a.holds_line(footer));
        // On 10 of 40 pages: the floor is 5.
        assert!(a.holds_line("section line"));
        assert!(!a.holds_line("Page 3 own words"));
        assert!(simple.host(host_key("b.example")).is_empty());
        assert!(simple.host(host_key("c.example")).is_empty());
    }
}
