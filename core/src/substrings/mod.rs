//! Repeated passages: every byte range of at least `N` bytes that occurs more than once in
//! the corpus (exact substring deduplication, Lee et al. 2022).
//!
//! # The definition
//!
//! Positions are byte offsets into each document's UTF-8 text and ranges are half-open,
//! `[start, end)`. A *window* is a substring of exactly `N` bytes lying inside one document
//! (a repeat never spans two documents). A substring of `L >= N` bytes occurs twice exactly
//! when each of its `L - N + 1` windows does, so:
//!
//! - a byte is **repeated** when it lies inside a window whose content occurs at least twice
//!   in the corpus (in the same or another document, overlapping occurrences count);
//! - with [`Occurrences::All`] every such window is reported (the reference tool's
//!   `collect`);
//! - with [`Occurrences::Later`] (the default) an occurrence of a window is reported unless
//!   it is the *first* occurrence of that content in corpus order (smallest `doc_id`, then
//!   smallest offset). Equivalently: a byte is reported when it lies in an occurrence of some
//!   substring of at least `N` bytes that also occurs earlier in corpus order. Overlapping and
//!   periodic repeats follow from the window rule: in `"abcabcabc"` with `N = 3`, the windows
//!   at 0, 1 and 2 (`abc`, `bca`, `cab`) are first occurrences and those at 3 to 6 are later
//!   ones, so `[3, 9)` is reported and striking it keeps `"abc"`; in `"aaaaa"` with `N = 2`,
//!   `[1, 5)` is reported and `"a"` is kept.
//!
//! The reported windows of a document are then merged into maximal ranges (windows that
//! overlap or touch form one range), each range's ends snap *inward* to UTF-8 character
//! boundaries ([`Snap::Chars`], always) or to word boundaries ([`Snap::Words`]), and a range
//! shorter than `N` after snapping is dropped. Dropping happens last, so a snapped range
//! never reaches outside the windows that justify it.
//!
//! # How they are found
//!
//! [`oracle`] is the definition executed literally (every substring of every document against
//! every position of the corpus): quadratic, for tests only. The real algorithm works on
//! [`Block`]s, concatenations of whole documents, in three steps:
//!
//! 1. **Anchors** ([`anchors`]): every window's anchor, the k-gram of smallest hash inside
//!    it, goes to the owner of its hash as an [`AnchorRecord`]; [`hot_anchors`] answers the
//!    anchors seen twice or more. A window can only repeat when its anchor is hot, so the
//!    windows of hot anchors ([`Block::hot_windows`]) are the only ones sent on.
//! 2. **Windows**: a suffix array of the block (built with libsais, with its permuted LCP
//!    array) lists the suffixes in sorted order, so the occurrences of each distinct window
//!    are adjacent in it, and one scan yields every distinct window with all of its positions
//!    in the block ([`Block::for_each_window`]). Windows crossing a document end are skipped
//!    there, which is why no separator bytes are needed. Blocks of different workers (or of
//!    one worker) meet by a [`WindowRecord`] per distinct window that repeats in the block or
//!    has a hot anchor: a 128-bit keyed hash of the window, its first position and its count
//!    in the block.
//! 3. **Verdicts**: [`resolve`] folds the records of one key and says, for every record of a
//!    window seen at least twice in the corpus, whether the record holds the window's first
//!    occurrence; [`Collector`] turns these verdicts back into window starts and
//!    [`ranges_for_document`] into ranges.
//!
//! [`find_repeats`] runs all of this in memory on a set of blocks, which is what the
//! distributed stage does across workers.
//!
//! # Exactness of the 128-bit key
//!
//! Two windows meet when their xxh3-128 keys (seeded by [`KEY_SEED`]) are equal. With `D`
//! distinct windows in the corpus the chance that any two distinct ones collide is at most
//! `D^2 / 2^129`: for 10^12 distinct windows (a terabyte of text) below 1.5 * 10^-15. A
//! collision could only add a falsely repeated window; it can never hide a real one. xxh3 is
//! not a cryptographic hash, so text crafted to collide is possible in principle; the seed
//! changes which texts collide.

pub mod anchors;

use fxhash::FxHashMap;
use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_128_with_seed;

pub use anchors::Winnow;

/// The default minimum length of a repeat, in bytes (the reference tool's and the issue's).
pub const DEFAULT_MIN_BYTES: usize = 50;

/// The seed of the 128-bit window keys. Any fixed value works; every process must use the
/// same one.
pub const KEY_SEED: u64 = 0x6e65_6172_6475_7031;

/// Which occurrences of a repeated passage are reported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Occurrences {
    /// Every copy (the reference tool's `collect`).
    All,
    /// Every copy but the first in corpus order: striking them keeps one copy.
    #[default]
    Later,
}

impl Occurrences {
    pub fn name(self) -> &'static str {
        match self {
            Occurrences::All => "all",
            Occurrences::Later => "later",
        }
    }
}

/// Where the ends of a reported range may fall.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Snap {
    /// On UTF-8 character boundaries.
    #[default]
    Chars,
    /// On word boundaries: never between two alphanumeric characters.
    Words,
}

impl Snap {
    pub fn name(self) -> &'static str {
        match self {
            Snap::Chars => "chars",
            Snap::Words => "words",
        }
    }
}

/// What a search for repeats is asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    /// `N`: the shortest repeat, in bytes (at least 1).
    pub min_bytes: usize,
    pub occurrences: Occurrences,
    pub snap: Snap,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            min_bytes: DEFAULT_MIN_BYTES,
            occurrences: Occurrences::default(),
            snap: Snap::default(),
        }
    }
}

/// A reported range of one document: bytes `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Range {
    pub doc_id: u64,
    pub start: u64,
    pub end: u64,
}

/// A position in the corpus; the derived order is corpus order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Pos {
    pub doc_id: u64,
    pub offset: u32,
}

/// Why a search cannot run.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SubstringError {
    #[error("document {doc_id} has {bytes} bytes; repeated passages are searched in documents of at most {max} bytes")]
    DocumentTooLong { doc_id: u64, bytes: u64, max: u64 },
    #[error("the suffix array of a block of {bytes} bytes could not be built: {reason}")]
    SuffixArray { bytes: u64, reason: String },
}

/// The longest document (and block) a [`Block`] holds: positions are 32-bit and libsais
/// builds 32-bit suffix arrays below 2^31 bytes.
pub const MAX_BLOCK_BYTES: usize = i32::MAX as usize;

/// Whether the ends of `[start, end)` may stay where they are under `snap`.
fn is_char_boundary(text: &[u8], i: usize) -> bool {
    i == 0 || i >= text.len() || (text[i] & 0xC0) != 0x80
}

/// The character that ends just before `i` (`i` on a character boundary).
fn char_before(text: &[u8], i: usize) -> Option<char> {
    let mut s = i.checked_sub(1)?;
    while s > 0 && !is_char_boundary(text, s) {
        s -= 1;
    }
    std::str::from_utf8(&text[s..i]).ok()?.chars().next()
}

/// The character that starts at `i` (`i` on a character boundary).
fn char_at(text: &[u8], i: usize) -> Option<char> {
    if i >= text.len() {
        return None;
    }
    let mut e = i + 1;
    while e < text.len() && !is_char_boundary(text, e) {
        e += 1;
    }
    std::str::from_utf8(&text[i..e]).ok()?.chars().next()
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric()
}

/// A word boundary: not between two word characters.
fn is_word_boundary(text: &[u8], i: usize) -> bool {
    match (char_before(text, i), char_at(text, i)) {
        (Some(a), Some(b)) => !(is_word_char(a) && is_word_char(b)),
        _ => true,
    }
}

/// Moves the ends of `[start, end)` inward to boundaries allowed by `snap`; `None` when
/// nothing is left.
pub fn snap_range(text: &[u8], start: usize, end: usize, snap: Snap) -> Option<(usize, usize)> {
    let (mut s, mut e) = (start, end.min(text.len()));
    while s < e && !is_char_boundary(text, s) {
        s += 1;
    }
    while e > s && !is_char_boundary(text, e) {
        e -= 1;
    }
    if snap == Snap::Words {
        while s < e && !(is_char_boundary(text, s) && is_word_boundary(text, s)) {
            s += 1;
        }
        while e > s && !(is_char_boundary(text, e) && is_word_boundary(text, e)) {
            e -= 1;
        }
    }
    (s < e).then_some((s, e))
}

/// The ranges of one document from the starts of its reported windows (any order, repeats
/// allowed): merged, snapped, and without those shorter than `N`.
pub fn ranges_for_document(
    doc_id: u64,
    text: &[u8],
    starts: &mut Vec<u32>,
    settings: &Settings,
) -> Vec<Range> {
    starts.sort_unstable();
    starts.dedup();
    let n = settings.min_bytes;
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for &s in starts.iter() {
        let (s, e) = (s as usize, s as usize + n);
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
        .into_iter()
        .filter_map(|(s, e)| snap_range(text, s, e, settings.snap))
        .filter(|(s, e)| e - s >= n)
        .map(|(s, e)| Range {
            doc_id,
            start: s as u64,
            end: e as u64,
        })
        .collect()
}

/// The definition, executed literally: for every substring of at least `N` bytes of every
/// document, every position of the corpus is compared with it. Quadratic and worse; for
/// tests on corpora of a few hundred bytes. `docs` must be sorted by `doc_id`.
pub fn oracle(docs: &[(u64, &[u8])], settings: &Settings) -> Vec<Range> {
    let n = settings.min_bytes.max(1);
    let mut out = Vec::new();
    for &(doc_id, text) in docs {
        let mut marked = vec![false; text.len()];
        for i in 0..text.len() {
            for len in n..=text.len() - i {
                let s = &text[i..i + len];
                // Every other occurrence of `s`, and whether one comes before (doc_id, i).
                let mut other = false;
                let mut earlier = false;
                for &(d2, t2) in docs {
                    for j in 0..=t2.len().saturating_sub(len) {
                        if t2.len() < len || (d2, j) == (doc_id, i) || &t2[j..j + len] != s {
                            continue;
                        }
                        other = true;
                        earlier |= (d2, j) < (doc_id, i);
                    }
                }
                if !other {
                    // A longer substring starting here occurs no more often.
                    break;
                }
                let report = match settings.occurrences {
                    Occurrences::All => true,
                    Occurrences::Later => earlier,
                };
                if report {
                    marked[i..i + len].iter_mut().for_each(|m| *m = true);
                }
            }
        }
        // Maximal runs of marked bytes, snapped, long enough.
        let mut i = 0;
        while i < marked.len() {
            if !marked[i] {
                i += 1;
                continue;
            }
            let start = i;
            while i < marked.len() && marked[i] {
                i += 1;
            }
            if let Some((s, e)) = snap_range(text, start, i, settings.snap) {
                if e - s >= n {
                    out.push(Range {
                        doc_id,
                        start: s as u64,
                        end: e as u64,
                    });
                }
            }
        }
    }
    out
}

/// Whole documents concatenated, the unit a suffix array is built over.
#[derive(Default, Debug)]
pub struct Block {
    text: Vec<u8>,
    /// `(doc_id, start in text)` in the order pushed.
    docs: Vec<(u64, usize)>,
}

impl Block {
    pub fn new() -> Self {
        Block::default()
    }

    /// Appends a document. Fails when it is longer than [`MAX_BLOCK_BYTES`]; the caller
    /// starts a new block before this one would grow past its own bound.
    pub fn push(&mut self, doc_id: u64, text: &[u8]) -> Result<(), SubstringError> {
        if text.len() > MAX_BLOCK_BYTES || self.text.len() + text.len() > MAX_BLOCK_BYTES {
            return Err(SubstringError::DocumentTooLong {
                doc_id,
                bytes: text.len() as u64,
                max: MAX_BLOCK_BYTES as u64,
            });
        }
        self.docs.push((doc_id, self.text.len()));
        self.text.extend_from_slice(text);
        Ok(())
    }

    /// Bytes of text held.
    pub fn len(&self) -> usize {
        self.text.len()
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// The documents, in the order pushed: `(doc_id, text)`.
    pub fn documents(&self) -> impl Iterator<Item = (u64, &[u8])> + '_ {
        self.spans()
            .map(|(doc_id, start, end)| (doc_id, &self.text[start..end]))
    }

    /// Where each document lies in the block, in the order pushed: `(doc_id, start, end)`.
    fn spans(&self) -> impl Iterator<Item = (u64, usize, usize)> + '_ {
        self.docs.iter().enumerate().map(|(i, &(doc_id, start))| {
            let end = self.docs.get(i + 1).map_or(self.text.len(), |d| d.1);
            (doc_id, start, end)
        })
    }

    /// Calls `f(key, positions)` once for every distinct window of `n` bytes lying inside one
    /// document of the block, with all its positions in the block in corpus order (each with
    /// its offset in the block). `key` is the window's 128-bit key ([`window_key`]). With
    /// `keep` (from [`Block::hot_windows`]: windows inside one document only), only the
    /// windows at offsets `keep` holds are listed. Nothing repeated is lost so: two copies of
    /// a window have anchors of equal content at two places, so their anchor is hot, whether
    /// the copies lie in this block or not.
    ///
    /// The simple version compares each suffix's first `n` bytes with the previous window's
    /// (a `memcmp` at a random place of the text per suffix: most of the time of a scan), and
    /// finds each suffix's document by binary search to skip windows crossing its end. Here
    /// the permuted LCP array (libsais, linear time) says the same: two windows listed one
    /// after the other (suffixes between them skipped) are equal when the smallest LCP
    /// between them is at least `n`. And one bit per offset says which suffixes to list at
    /// all, so that a suffix costs two reads (its LCP and its bit) and only the listed ones
    /// are looked up.
    pub fn for_each_window(
        &self,
        n: usize,
        keep: Option<&Bits>,
        mut f: impl FnMut(u128, &[(Pos, u32)]),
    ) -> Result<(), SubstringError> {
        let n = n.max(1);
        if self.text.len() < n {
            return Ok(());
        }
        let failed = |e: libsais::LibsaisError| SubstringError::SuffixArray {
            bytes: self.text.len() as u64,
            reason: format!("{e:?}"),
        };
        let sa = libsais::SuffixArrayConstruction::for_text(&self.text)
            .in_owned_buffer32()
            .single_threaded()
            .run()
            .map_err(failed)?
            .plcp_construction()
            .single_threaded()
            .run()
            .map_err(failed)?;
        let (suffixes, plcp) = (sa.suffix_array(), sa.plcp());
        let fitting;
        let listed = match keep {
            Some(keep) => keep,
            None => {
                fitting = self.fitting_windows(n);
                &fitting
            }
        };
        // Each listed suffix's document, to name its positions: the simple version is a
        // binary search over the documents (10% of dev-medium's search with a listed suffix
        // each). Here a table gives the document where every 256 bytes of the block begin,
        // and a few steps forward find the suffix's.
        let spans: Vec<(u64, usize, usize)> = self.spans().collect();
        let pages: Vec<u32> = (0..=self.text.len() >> LOCATE_PAGE_BITS)
            .map(|page| (spans.partition_point(|s| s.1 <= page << LOCATE_PAGE_BITS) - 1) as u32)
            .collect();
        let locate = |p: usize| -> usize {
            let mut doc = pages[p >> LOCATE_PAGE_BITS] as usize;
            while spans.get(doc + 1).is_some_and(|s| s.1 <= p) {
                doc += 1;
            }
            doc
        };
        // The current group's offsets in the block, and the smallest LCP since its last one.
        let mut group: Vec<usize> = Vec::new();
        let mut positions: Vec<(Pos, u32)> = Vec::new();
        let mut since = u32::MAX;
        let mut flush = |group: &mut Vec<usize>| {
            let at = group[0];
            positions.clear();
            positions.extend(group.iter().map(|&p| {
                let (doc_id, start, _) = spans[locate(p)];
                let offset = (p - start) as u32;
                (Pos { doc_id, offset }, p as u32)
            }));
            positions.sort_unstable();
            f(window_key(&self.text[at..at + n]), &positions);
            group.clear();
        };
        for (i, &p) in suffixes.iter().enumerate() {
            // The suffix array visits the PLCP array, the bits and the text in random order:
            // a cache miss each. Asking for them a few dozen suffixes ahead overlaps the
            // misses (the whole search of dev-medium took 40 CPU s without it, 31.5 with it:
            // one run each); the text only for listed suffixes, once their bit is near.
            if let Some(&ahead) = suffixes.get(i + PREFETCH_AHEAD) {
                prefetch(plcp.as_ptr().wrapping_add(ahead as usize) as *const u8);
                prefetch(listed.word_ptr(ahead as usize));
            }
            if let Some(&near) = suffixes.get(i + PREFETCH_AHEAD / 2) {
                if listed.get(near as usize) {
                    // The window's first and last byte: it spans two cache lines or three.
                    prefetch(self.text.as_ptr().wrapping_add(near as usize));
                    prefetch(self.text.as_ptr().wrapping_add(near as usize + n - 1));
                }
            }
            let p = p as usize;
            since = since.min(plcp[p] as u32);
            if !listed.get(p) {
                continue;
            }
            if !group.is_empty() && (since as usize) < n {
                flush(&mut group);
            }
            group.push(p);
            since = u32::MAX;
        }
        if !group.is_empty() {
            flush(&mut group);
        }
        Ok(())
    }

    /// The offsets of the block where a window of `n` bytes lies inside one document.
    fn fitting_windows(&self, n: usize) -> Bits {
        let mut out = Bits::new(self.text.len());
        for (_, start, end) in self.spans() {
            if end - start >= n {
                out.set_range(start, end - n + 1);
            }
        }
        out
    }

    /// Calls `f(offset in the block, hash)` for every anchor of every document.
    pub fn anchors(&self, winnow: &mut Winnow, mut f: impl FnMut(usize, u64)) {
        for (_, start, end) in self.spans() {
            winnow.anchors(&self.text[start..end], |a, h| f(start + a, h));
        }
    }

    /// The windows (by offset in the block) whose anchor is in `hot`.
    pub fn hot_windows(&self, winnow: &mut Winnow, hot: &Bits) -> Bits {
        let mut out = Bits::new(self.text.len());
        for (_, start, end) in self.spans() {
            winnow.windows(&self.text[start..end], |p, a, _| {
                if hot.get(start + a) {
                    out.set(start + p);
                }
            });
        }
        out
    }
}

/// A fixed set of positions, one bit each.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bits {
    words: Vec<u64>,
}

impl Bits {
    /// `len` positions, none set.
    pub fn new(len: usize) -> Self {
        Bits {
            words: vec![0; len.div_ceil(64)],
        }
    }

    pub fn set(&mut self, i: usize) {
        self.words[i / 64] |= 1 << (i % 64);
    }

    pub fn get(&self, i: usize) -> bool {
        self.words[i / 64] >> (i % 64) & 1 == 1
    }

    /// Sets every position in `[from, to)`.
    pub fn set_range(&mut self, from: usize, to: usize) {
        for i in from..to {
            self.set(i);
        }
    }

    /// Where position `i`'s bit lies in memory (for a prefetch; any `i` is allowed).
    fn word_ptr(&self, i: usize) -> *const u8 {
        self.words.as_ptr().wrapping_add(i / 64) as *const u8
    }

    /// The positions set in `[from, to)`, in order.
    pub fn ones(&self, from: usize, to: usize) -> impl Iterator<Item = usize> + '_ {
        (from..to).filter(move |&i| self.words[i / 64] != 0 && self.get(i))
    }
}

/// An anchor sent to the owner of its hash: the hash and where it lies (`origin << 48 |
/// block << 32 | offset`: at most [`MAX_ORIGINS`] workers and [`MAX_BLOCKS`] blocks each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnchorRecord {
    pub hash: u64,
    pub at: u64,
}

/// The most workers an anchor can name.
pub const MAX_ORIGINS: usize = 1 << 16;
/// The most blocks one worker can hold.
pub const MAX_BLOCKS: usize = 1 << 16;

impl AnchorRecord {
    pub fn new(hash: u64, origin: usize, block: usize, offset: usize) -> Self {
        debug_assert!(origin < MAX_ORIGINS && block < MAX_BLOCKS && offset <= u32::MAX as usize);
        AnchorRecord {
            hash,
            at: (origin as u64) << 48 | (block as u64) << 32 | offset as u64,
        }
    }

    pub fn origin(&self) -> usize {
        (self.at >> 48) as usize
    }

    pub fn block(&self) -> usize {
        (self.at >> 32 & 0xFFFF) as usize
    }

    pub fn offset(&self) -> usize {
        (self.at & 0xFFFF_FFFF) as usize
    }
}

/// Calls `f` with every record of `records` whose hash occurs at least twice (the hot
/// anchors); `records` is sorted in place.
pub fn hot_anchors(records: &mut [AnchorRecord], mut f: impl FnMut(AnchorRecord)) {
    records.sort_unstable_by_key(|r| r.hash);
    for group in records.chunk_by(|a, b| a.hash == b.hash) {
        if group.len() > 1 {
            group.iter().for_each(|&r| f(r));
        }
    }
}

/// [`Block::for_each_window`] finds a position's document from a table of where every
/// `2^LOCATE_PAGE_BITS` bytes of the block begin (4 bytes per 256 bytes of text).
const LOCATE_PAGE_BITS: u32 = 8;

/// How many suffixes ahead [`Block::for_each_window`] asks for the memory it will read.
const PREFETCH_AHEAD: usize = 32;

/// Asks the processor to bring the cache line of `p` closer; no effect elsewhere.
#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The 128-bit key of a window's content.
pub fn window_key(window: &[u8]) -> u128 {
    xxh3_128_with_seed(window, KEY_SEED)
}

/// What a block tells the owner of a window's key: the window's first position in the block,
/// whether it occurs there more than once (all that matters of the count), and which block
/// (worker) sent it, for the answer. 32 bytes, flat: the owner holds one per distinct window
/// of every block until the search ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowRecord {
    pub key: u128,
    pub first_doc: u64,
    pub first_offset: u32,
    /// `origin << 1 | (seen more than once in the block)`.
    pub origin_repeated: u32,
}

impl WindowRecord {
    pub fn new(key: u128, first: Pos, count: usize, origin: u32) -> Self {
        WindowRecord {
            key,
            first_doc: first.doc_id,
            first_offset: first.offset,
            origin_repeated: origin << 1 | u32::from(count > 1),
        }
    }

    pub fn first(&self) -> Pos {
        Pos {
            doc_id: self.first_doc,
            offset: self.first_offset,
        }
    }

    /// 1, or 2 for "two or more".
    pub fn count(&self) -> u32 {
        1 + (self.origin_repeated & 1)
    }

    pub fn origin(&self) -> u32 {
        self.origin_repeated >> 1
    }

    /// The record as [`RECORD_BYTES`] little-endian bytes (a spilled run's format).
    pub fn to_bytes(&self) -> [u8; RECORD_BYTES] {
        let mut out = [0u8; RECORD_BYTES];
        out[..16].copy_from_slice(&self.key.to_le_bytes());
        out[16..24].copy_from_slice(&self.first_doc.to_le_bytes());
        out[24..28].copy_from_slice(&self.first_offset.to_le_bytes());
        out[28..].copy_from_slice(&self.origin_repeated.to_le_bytes());
        out
    }

    /// The record [`Self::to_bytes`] wrote.
    pub fn from_bytes(b: &[u8; RECORD_BYTES]) -> Self {
        let le4 = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        WindowRecord {
            key: u128::from_le_bytes(b[..16].try_into().expect("16 bytes")),
            first_doc: u64::from_le_bytes(b[16..24].try_into().expect("8 bytes")),
            first_offset: le4(24),
            origin_repeated: le4(28),
        }
    }
}

/// Bytes of a [`WindowRecord`], in memory and spilled.
pub const RECORD_BYTES: usize = 32;

/// The owner's answer to one record of a window seen at least twice in the corpus: whether
/// the record's `first` is the window's first occurrence in the whole corpus.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub first: Pos,
    pub is_global_first: bool,
    pub origin: u32,
}

/// Folds the records of every key (in any order; `records` is sorted in place) and calls
/// `f` with a verdict for every record whose window occurs at least twice in all.
pub fn resolve(records: &mut [WindowRecord], mut f: impl FnMut(Verdict)) {
    records.sort_unstable_by(record_order);
    let mut i = 0;
    while i < records.len() {
        let key = records[i].key;
        let mut j = i;
        while j < records.len() && records[j].key == key {
            j += 1;
        }
        resolve_group(&records[i..j], &mut f);
        i = j;
    }
}

/// The order [`resolve`] folds records in (and a spilled run is sorted in): by key, then
/// by first position.
pub fn record_order(a: &WindowRecord, b: &WindowRecord) -> std::cmp::Ordering {
    (a.key, a.first()).cmp(&(b.key, b.first()))
}

/// Folds the records of one key, sorted by [`record_order`]: when the window occurs at
/// least twice in all, calls `f` with a verdict for every record.
pub fn resolve_group(group: &[WindowRecord], mut f: impl FnMut(Verdict)) {
    let count: u32 = group.iter().map(|r| r.count()).sum();
    if count < 2 {
        return;
    }
    let global = group[0].first();
    for r in group {
        f(Verdict {
            first: r.first(),
            is_global_first: r.first() == global,
            origin: r.origin(),
        });
    }
}

/// One worker's side of the search over the blocks it scanned: what it keeps to answer
/// verdicts, and the window starts the verdicts report.
///
/// A window that occurs more than once inside one block is repeated whatever the other
/// blocks hold, and its copies after the block's first are never the corpus's first copy
/// (the block's first comes before them): they are marked at once, during the scan. Only
/// the block's first copy waits for a verdict, which says whether it is the corpus's first.
/// (An earlier version kept those copies' positions until the verdicts came: 4 bytes per
/// copy plus 32 per window, gigabytes on generated HTML, for an answer known in advance.)
#[derive(Default, Debug)]
pub struct Collector {
    /// `doc_id` to `(block, start in the block)` of every document scanned. (With a sorted
    /// vector and a binary search per verdict, the report stage took 2.8 s of dev-medium's
    /// 26 CPU s; with the map 0.65 s: two runs each.)
    docs: FxHashMap<u64, (u32, u32)>,
    /// Reported window starts, by block (in the order scanned) and offset in the block.
    starts: Vec<Bits>,
}

impl Collector {
    pub fn new() -> Self {
        Collector::default()
    }

    /// Scans the next block (blocks are numbered in the order scanned) and returns through
    /// `send` the record of each of its distinct windows; with `keep` (from
    /// [`Block::hot_windows`]), only of those with a hot anchor (every repeated window has one).
    pub fn scan(
        &mut self,
        block: &Block,
        n: usize,
        origin: u32,
        keep: Option<&Bits>,
        mut send: impl FnMut(WindowRecord),
    ) -> Result<(), SubstringError> {
        let index = self.starts.len() as u32;
        self.starts.push(Bits::new(block.len()));
        self.docs.extend(
            block
                .docs
                .iter()
                .map(|&(doc_id, start)| (doc_id, (index, start as u32))),
        );
        let bits = &mut self.starts[index as usize];
        block.for_each_window(n, keep, |key, positions| {
            // Copies after the block's first: reported, whatever the verdict (see above).
            for &(_, at) in &positions[1..] {
                bits.set(at as usize);
            }
            send(WindowRecord::new(
                key,
                positions[0].0,
                positions.len(),
                origin,
            ));
        })
    }

    /// Takes one verdict about a record this collector sent.
    pub fn apply(&mut self, verdict: Verdict, occurrences: Occurrences) {
        let first = verdict.first;
        if !(occurrences == Occurrences::Later && verdict.is_global_first) {
            let (block, start) = self.docs[&first.doc_id];
            self.starts[block as usize].set(start as usize + first.offset as usize);
        }
    }

    /// The ranges of every document of `blocks` (the blocks scanned, in the same order),
    /// sorted by `(doc_id, start)`; the collector is emptied.
    pub fn ranges(&mut self, blocks: &[Block], settings: &Settings) -> Vec<Range> {
        let starts = std::mem::take(self).starts;
        let mut out = Vec::new();
        let mut buf = Vec::new();
        for (block, bits) in blocks.iter().zip(&starts) {
            for (doc_id, start, end) in block.spans() {
                buf.clear();
                buf.extend(bits.ones(start, end).map(|b| (b - start) as u32));
                if !buf.is_empty() {
                    out.extend(ranges_for_document(
                        doc_id,
                        &block.text[start..end],
                        &mut buf,
                        settings,
                    ));
                }
            }
        }
        out.sort_unstable();
        out
    }
}

/// The whole search in memory over `blocks` (each one as a worker would hold it): every block
/// is scanned, the records are resolved together, and the verdicts go back to their blocks.
/// The result does not depend on how the documents are split into blocks.
pub fn find_repeats(blocks: &[Block], settings: &Settings) -> Result<Vec<Range>, SubstringError> {
    let n = settings.min_bytes;
    // Anchors first: which windows can occur twice at all.
    let mut keep: Vec<Option<Bits>> = blocks.iter().map(|_| None).collect();
    if let Some(mut winnow) = Winnow::new(n) {
        let mut anchors = Vec::new();
        for (i, block) in blocks.iter().enumerate() {
            block.anchors(&mut winnow, |at, hash| {
                anchors.push(AnchorRecord::new(hash, i, 0, at))
            });
        }
        let mut hot: Vec<Bits> = blocks.iter().map(|b| Bits::new(b.len())).collect();
        hot_anchors(&mut anchors, |r| hot[r.origin()].set(r.offset()));
        for ((block, hot), keep) in blocks.iter().zip(&hot).zip(&mut keep) {
            *keep = Some(block.hot_windows(&mut winnow, hot));
        }
    }
    let mut collectors: Vec<Collector> = blocks.iter().map(|_| Collector::new()).collect();
    let mut records = Vec::new();
    for (i, (block, collector)) in blocks.iter().zip(&mut collectors).enumerate() {
        collector.scan(block, n, i as u32, keep[i].as_ref(), |r| records.push(r))?;
    }
    let mut verdicts = Vec::new();
    resolve(&mut records, |v| verdicts.push(v));
    for v in verdicts {
        collectors[v.origin as usize].apply(v, settings.occurrences);
    }
    let mut out: Vec<Range> = Vec::new();
    for (block, collector) in blocks.iter().zip(&mut collectors) {
        out.extend(collector.ranges(std::slice::from_ref(block), settings));
    }
    out.sort_unstable();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(n: usize, occurrences: Occurrences, snap: Snap) -> Settings {
        Settings {
            min_bytes: n,
            occurrences,
            snap,
        }
    }

    fn ranges(v: &[Range]) -> Vec<(u64, u64, u64)> {
        v.iter().map(|r| (r.doc_id, r.start, r.end)).collect()
    }

    /// Splits `docs` into `parts` blocks round-robin (so a block's documents are not
    /// contiguous in corpus order) and runs the search.
    fn blocked(docs: &[(u64, &[u8])], parts: usize, s: &Settings) -> Vec<Range> {
        let mut blocks: Vec<Block> = (0..parts).map(|_| Block::new()).collect();
        for (i, (id, t)) in docs.iter().enumerate() {
            blocks[i % parts].push(*id, t).unwrap();
        }
        find_repeats(&blocks, s).unwrap()
    }

    #[test]
    fn worked_example_of_the_docs() {
        let docs: [(u64, &[u8]); 3] = [
            (0, b"the licence text. Hello"),
            (1, b"Intro: the licence text."),
            (2, b"abcabcabc"),
        ];
        let later = settings(8, Occurrences::Later, Snap::Chars);
        assert_eq!(
            ranges(&oracle(&docs, &later)),
            vec![(1, 7, 24)],
            "the first copy (doc 0) is kept; doc 2's period is shorter than N"
        );
        let all = settings(8, Occurrences::All, Snap::Chars);
        assert_eq!(ranges(&oracle(&docs, &all)), vec![(0, 0, 17), (1, 7, 24)]);
        let periodic = settings(3, Occurrences::Later, Snap::Chars);
        assert_eq!(
            ranges(&oracle(&[(2, b"abcabcabc")], &periodic)),
            vec![(2, 3, 9)]
        );
        for s in [later, all, periodic] {
            assert_eq!(blocked(&docs, 1, &s), oracle(&docs, &s));
            assert_eq!(blocked(&docs, 2, &s), oracle(&docs, &s));
        }
    }

    #[test]
    fn snapping_moves_inward() {
        let text = "añb word".as_bytes(); // ñ is 2 bytes at 1..3
        assert_eq!(snap_range(text, 2, 4, Snap::Chars), Some((3, 4)));
        assert_eq!(snap_range(text, 0, 2, Snap::Chars), Some((0, 1)));
        assert_eq!(snap_range(text, 2, 3, Snap::Chars), None);
        // "añb word": words at 0..4 and 5..9; a range from inside the first word to inside
        // the second keeps only the space.
        assert_eq!(snap_range(text, 1, 7, Snap::Words), Some((4, 5)));
        assert_eq!(snap_range(text, 0, 9, Snap::Words), Some((0, 9)));
    }

    #[test]
    fn occurrences_later_of_a_run() {
        let s = settings(2, Occurrences::Later, Snap::Chars);
        assert_eq!(ranges(&oracle(&[(0, b"aaaaa")], &s)), vec![(0, 1, 5)]);
        assert_eq!(ranges(&blocked(&[(0, b"aaaaa")], 1, &s)), vec![(0, 1, 5)]);
    }

    /// A tiny seeded generator (the tests need no crate for it).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// A small random corpus with planted repeats: at document starts and ends, periodic
    /// runs, copies inside one document, and multi-byte characters.
    fn corpus(rng: &mut Rng) -> Vec<(u64, Vec<u8>)> {
        let alphabet: [&str; 8] = ["a", "b", "c", " ", "é", "€", "x", "y"];
        let docs = 1 + rng.below(5);
        let passage: String = (0..3 + rng.below(8))
            .map(|_| alphabet[rng.below(alphabet.len())])
            .collect();
        let mut out = Vec::new();
        for d in 0..docs {
            let mut s = String::new();
            match rng.below(5) {
                0 => s.push_str(&passage),
                1 => s.push_str(&"abc".repeat(1 + rng.below(4))),
                _ => {}
            }
            for _ in 0..rng.below(14) {
                s.push_str(alphabet[rng.below(alphabet.len())]);
            }
            if rng.below(3) == 0 {
                s.push_str(&passage);
            }
            if rng.below(4) == 0 {
                let copy = s.clone();
                s.push_str(&copy);
            }
            // doc ids with gaps, as several files give
            out.push(((d as u64) * 3 + (d as u64 % 2) * (1 << 40), s.into_bytes()));
        }
        out.sort();
        out
    }

    /// Checks the search at 1, 2 and 4 blocks against the definition; 1 when it found
    /// repeats.
    fn splits_match_the_oracle(refs: &[(u64, &[u8])], s: &Settings, what: &str) -> usize {
        let want = oracle(refs, s);
        for parts in [1, 2, 4] {
            assert_eq!(
                blocked(refs, parts, s),
                want,
                "{what}, {s:?}, {parts} blocks, corpus {refs:?}"
            );
        }
        usize::from(!want.is_empty())
    }

    #[test]
    fn random_corpora_match_the_oracle_at_any_split() {
        let mut rng = Rng(7);
        let mut found = 0;
        for round in 0..300 {
            let docs = corpus(&mut rng);
            let refs: Vec<(u64, &[u8])> = docs.iter().map(|(i, t)| (*i, t.as_slice())).collect();
            let longest = refs.iter().map(|d| d.1.len()).max().unwrap_or(0);
            let n = match round % 4 {
                0 => 1,
                1 => longest + 1, // longer than every document
                _ => 1 + rng.below(8),
            };
            for occurrences in [Occurrences::All, Occurrences::Later] {
                for snap in [Snap::Chars, Snap::Words] {
                    let s = settings(n, occurrences, snap);
                    found += splits_match_the_oracle(&refs, &s, &format!("round {round}"));
                }
            }
        }
        // The planted repeats are found often enough for the comparison to mean something.
        assert!(found > 300, "only {found} of 1200 searches found repeats");
    }

    /// Longer documents built from a few 6-byte pieces, so that windows of 16 to 24 bytes
    /// (where anchors filter) repeat often, across documents and inside one.
    fn piece_corpus(rng: &mut Rng) -> Vec<(u64, Vec<u8>)> {
        let pieces: [&str; 6] = ["abcdef", "the ca", "t sat ", "é€ab", "xxxxxx", "on mat"];
        let mut out = Vec::new();
        for d in 0..2 + rng.below(5) {
            let mut s = String::new();
            for _ in 0..3 + rng.below(25) {
                let kinds = 2 + rng.below(3);
                let piece = pieces[rng.below(kinds)];
                let cut = rng.below(2) * usize::from(piece.is_ascii());
                s.push_str(&piece[..piece.len() - cut]);
            }
            out.push((d as u64 * 5 + 1, s.into_bytes()));
        }
        out
    }

    #[test]
    fn anchored_windows_match_the_oracle_at_any_split() {
        let mut rng = Rng(11);
        let mut found = 0;
        for round in 0..200 {
            let docs = piece_corpus(&mut rng);
            let refs: Vec<(u64, &[u8])> = docs.iter().map(|(i, t)| (*i, t.as_slice())).collect();
            let n = anchors::MIN_FILTERED_BYTES + rng.below(9);
            for occurrences in [Occurrences::All, Occurrences::Later] {
                let s = settings(n, occurrences, Snap::Chars);
                found += splits_match_the_oracle(&refs, &s, &format!("round {round}"));
            }
        }
        assert!(found > 150, "only {found} of 400 searches found repeats");
    }

    #[test]
    fn a_record_is_32_bytes_and_round_trips() {
        assert_eq!(std::mem::size_of::<WindowRecord>(), 32);
        let first = Pos {
            doc_id: 1 << 40 | 7,
            offset: 9,
        };
        let r = WindowRecord::new(5 | 7 << 100, first, 3, 1234);
        assert_eq!((r.first(), r.count(), r.origin()), (first, 2, 1234));
        assert_eq!(WindowRecord::from_bytes(&r.to_bytes()), r);
        assert_eq!(WindowRecord::new(5, first, 1, 0).count(), 1);
    }

    #[test]
    fn a_block_keeps_its_documents() {
        let mut block = Block::new();
        block.push(1, b"abc").unwrap();
        assert_eq!(block.len(), 3);
        assert_eq!(
            block.documents().collect::<Vec<_>>(),
            vec![(1, &b"abc"[..])]
        );
    }
}
