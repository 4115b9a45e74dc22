//! Tokens: how text becomes words, exactly as the simhash-doc scheme defines them.
//!
//! 1. Characters of Unicode category Cf (format characters: soft hyphen, zero-width space,
//!    byte-order mark, ...) are dropped: they neither join nor split.
//! 2. A token is a maximal run of characters in the categories Ll Lu Lt Lo Lm Mn Nd Pc
//!    (letters, combining marks, decimal digits, connector punctuation such as `_`).
//! 3. Each token is lower-cased with the full Unicode mapping (`str::to_lowercase`, which
//!    also knows the Greek final sigma).
//!
//! The tokenizer reports every token with a flag saying whether it holds an alphabetic
//! character. The simhash-doc features keep only those (so pure numbers go, `4u2` stays);
//! the exact-duplicate key keeps all of them, because "2024" and "2025" are different
//! content.
//!
//! The ASCII fast path decides a byte's class with a table lookup and lower-cases tokens of
//! ASCII letters in place; other characters go through the Unicode general-category table
//! (cached below U+3400), and a token holding one is lower-cased as a whole.

use unicode_general_category::{get_general_category, GeneralCategory as Gc};

/// What a character does to tokenization.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum CharClass {
    /// Part of a token.
    Word,
    /// Ends the current token.
    Separator,
    /// Dropped without ending the token (category Cf).
    Ignored,
}

/// The class of a character straight from the Unicode general category (the definition;
/// [`class_of`] answers the same from a cache for the common ranges).
fn classify(ch: char) -> CharClass {
    if ch.is_ascii() {
        return if ch.is_ascii_alphanumeric() || ch == '_' {
            CharClass::Word
        } else {
            CharClass::Separator
        };
    }
    match get_general_category(ch) {
        Gc::LowercaseLetter
        | Gc::UppercaseLetter
        | Gc::TitlecaseLetter
        | Gc::OtherLetter
        | Gc::ModifierLetter
        | Gc::NonspacingMark
        | Gc::DecimalNumber
        | Gc::ConnectorPunctuation => CharClass::Word,
        Gc::Format => CharClass::Ignored,
        _ => CharClass::Separator,
    }
}

// Bits of a byte's class in `ASCII_CLASS` and of a character's entry in the cache.
/// Part of a token.
const WORD: u8 = 1;
/// Alphabetic (`char::is_alphabetic`).
const ALPHA: u8 = 2;
/// Dropped without ending the token (Cf).
const IGNORED: u8 = 4;
/// Not ASCII: the byte starts or continues a multi-byte character.
const HIGH: u8 = 8;

const fn ascii_class_table() -> [u8; 256] {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = if c >= 0x80 {
            HIGH
        } else if c.is_ascii_alphabetic() {
            WORD | ALPHA
        } else if c.is_ascii_digit() || c == b'_' {
            WORD
        } else {
            0
        };
        b += 1;
    }
    table
}

/// The class bits of every byte: ASCII bytes fully, others only flagged [`HIGH`].
static ASCII_CLASS: [u8; 256] = ascii_class_table();

/// Characters below this code point have their class bits cached.
const CACHED_BELOW: u32 = 0x3400;

fn char_bits(ch: char) -> u8 {
    let alpha = if ch.is_alphabetic() { ALPHA } else { 0 };
    match classify(ch) {
        CharClass::Word => WORD | alpha,
        CharClass::Ignored => IGNORED | alpha,
        CharClass::Separator => alpha,
    }
}

/// The class bits of the characters below [`CACHED_BELOW`] (Latin, Greek, Cyrillic, ...,
/// general punctuation, CJK symbols), computed once: the general-category lookup is a
/// binary search.
fn char_cache() -> &'static [u8] {
    static CACHE: std::sync::OnceLock<Box<[u8]>> = std::sync::OnceLock::new();
    CACHE.get_or_init(|| {
        (0..CACHED_BELOW)
            .map(|cp| char::from_u32(cp).map_or(0, char_bits))
            .collect()
    })
}

/// The class bits of a character: [`WORD`], [`IGNORED`] and [`ALPHA`].
#[inline]
fn class_of(ch: char, cache: &[u8]) -> u8 {
    match cache.get(ch as usize) {
        Some(&bits) => bits,
        None => char_bits(ch),
    }
}

/// Bit masks of 64 bytes: bit `k` of `word` is set if byte `k` is an ASCII word byte
/// (`[0-9A-Za-z_]`), of `alpha` if it is an ASCII letter, of `high` if it is not ASCII.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
struct BlockMasks {
    word: u64,
    alpha: u64,
    high: u64,
}

/// The instruction sets [`push_masks`] can classify bytes with, widest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Simd {
    /// 64 bytes per compare, masks straight out of the compare (AVX-512 BW).
    Avx512,
    /// 32 bytes per compare (AVX2).
    Avx2,
    /// 16 bytes per compare (SSE2, in every x86_64 processor).
    Sse2,
    /// A table lookup per byte (other architectures; on x86_64 only the tests use it).
    #[cfg_attr(target_arch = "x86_64", allow(dead_code))]
    Scalar,
}

impl Default for Simd {
    fn default() -> Self {
        Simd::detect()
    }
}

impl Simd {
    /// The widest this processor has (detected once; the answer is cached by std).
    fn detect() -> Simd {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512bw") {
                return Simd::Avx512;
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                return Simd::Avx2;
            }
            Simd::Sse2
        }
        #[cfg(not(target_arch = "x86_64"))]
        Simd::Scalar
    }

    /// Whether this processor can run `self`.
    #[cfg(test)]
    fn available(self) -> bool {
        match self {
            Simd::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Simd::Sse2 => true,
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            Simd::Avx512 => std::arch::is_x86_feature_detected!("avx512bw"),
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }
}

/// Appends the masks of `bytes`, 64 at a time (the last block padded with zero bytes, which
/// are separators), with the instruction set `simd`, which the processor must have.
///
/// The simple equivalent is [`block_masks_scalar`] per block; the vector versions compute
/// the same bits (tested below) with one compare per 16, 32 or 64 bytes. The choice is made
/// once per text, outside the loop, so each loop is compiled for its instruction set.
fn push_masks(simd: Simd, bytes: &[u8], out: &mut Vec<BlockMasks>) {
    match simd {
        // SAFETY: `simd` came from `Simd::detect` (or a test's `available` check), so the
        // processor has the instruction set each loop is compiled for.
        #[cfg(target_arch = "x86_64")]
        Simd::Avx512 => unsafe { push_masks_avx512(bytes, out) },
        #[cfg(target_arch = "x86_64")]
        Simd::Avx2 => unsafe { push_masks_avx2(bytes, out) },
        #[cfg(target_arch = "x86_64")]
        Simd::Sse2 => unsafe { push_masks_sse2(bytes, out) },
        _ => push_masks_with(bytes, out, block_masks_scalar),
    }
}

/// The loop of [`push_masks`] around one block classifier.
#[inline(always)]
fn push_masks_with(
    bytes: &[u8],
    out: &mut Vec<BlockMasks>,
    block: impl Fn(&[u8; 64]) -> BlockMasks,
) {
    let mut blocks = bytes.chunks_exact(64);
    for b in &mut blocks {
        out.push(block(b.try_into().unwrap()));
    }
    if !blocks.remainder().is_empty() {
        let mut last = [0u8; 64];
        last[..blocks.remainder().len()].copy_from_slice(blocks.remainder());
        out.push(block(&last));
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512bw")]
fn push_masks_avx512(bytes: &[u8], out: &mut Vec<BlockMasks>) {
    push_masks_with(bytes, out, |b| block_masks_avx512(b))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn push_masks_avx2(bytes: &[u8], out: &mut Vec<BlockMasks>) {
    push_masks_with(bytes, out, |b| block_masks_avx2(b))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn push_masks_sse2(bytes: &[u8], out: &mut Vec<BlockMasks>) {
    push_masks_with(bytes, out, |b| block_masks_sse2(b))
}

/// [`block_masks_scalar`] with AVX-512 BW: one load, and each class's 64-bit mask comes
/// straight out of an unsigned range compare (`x - lo <= hi - lo`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512bw")]
#[inline]
fn block_masks_avx512(block: &[u8; 64]) -> BlockMasks {
    use std::arch::x86_64::*;
    // SAFETY: the load reads exactly the 64 bytes of `block` (unaligned load).
    let v = unsafe { _mm512_loadu_si512(block.as_ptr().cast()) };
    let in_range = |x: __m512i, lo: u8, hi: u8| {
        _mm512_cmple_epu8_mask(
            _mm512_sub_epi8(x, _mm512_set1_epi8(lo as i8)),
            _mm512_set1_epi8((hi - lo) as i8),
        )
    };
    // Bytes >= 0x80 stay >= 0xa0 after `| 0x20`, out of every range.
    let letter = in_range(_mm512_or_si512(v, _mm512_set1_epi8(0x20)), b'a', b'z');
    let digit = in_range(v, b'0', b'9');
    let underscore = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'_' as i8));
    BlockMasks {
        word: letter | digit | underscore,
        alpha: letter,
        high: _mm512_movepi8_mask(v),
    }
}

/// [`block_masks_scalar`] with AVX2: two halves of 32 bytes, unsigned range compares built
/// from `min` (`min(x - lo, hi - lo) == x - lo`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn block_masks_avx2(block: &[u8; 64]) -> BlockMasks {
    use std::arch::x86_64::*;
    let mut masks = BlockMasks::default();
    for half in 0..2 {
        // SAFETY: the load reads bytes 32 * half .. 32 * half + 32 of `block`.
        let v = unsafe { _mm256_loadu_si256(block.as_ptr().add(32 * half).cast()) };
        let in_range = |x: __m256i, lo: u8, hi: u8| {
            let t = _mm256_sub_epi8(x, _mm256_set1_epi8(lo as i8));
            _mm256_cmpeq_epi8(_mm256_min_epu8(t, _mm256_set1_epi8((hi - lo) as i8)), t)
        };
        let letter = in_range(_mm256_or_si256(v, _mm256_set1_epi8(0x20)), b'a', b'z');
        let digit = in_range(v, b'0', b'9');
        let underscore = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'_' as i8));
        let word = _mm256_or_si256(_mm256_or_si256(letter, digit), underscore);
        let shift = 32 * half;
        masks.word |= (_mm256_movemask_epi8(word) as u32 as u64) << shift;
        masks.alpha |= (_mm256_movemask_epi8(letter) as u32 as u64) << shift;
        masks.high |= (_mm256_movemask_epi8(v) as u32 as u64) << shift;
    }
    masks
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
#[inline]
fn block_masks_sse2(block: &[u8; 64]) -> BlockMasks {
    use std::arch::x86_64::*;
    let mut masks = BlockMasks::default();
    for (q, part) in block.chunks_exact(16).enumerate() {
        let lo = u64::from_le_bytes(part[..8].try_into().unwrap());
        let hi = u64::from_le_bytes(part[8..].try_into().unwrap());
        let v = _mm_set_epi64x(hi as i64, lo as i64);
        // Bytes >= 0x80 are negative in the signed compares, so they fall in no range.
        let lower = _mm_or_si128(v, _mm_set1_epi8(0x20));
        let letter = _mm_and_si128(
            _mm_cmpgt_epi8(lower, _mm_set1_epi8(b'a' as i8 - 1)),
            _mm_cmplt_epi8(lower, _mm_set1_epi8(b'z' as i8 + 1)),
        );
        let digit = _mm_and_si128(
            _mm_cmpgt_epi8(v, _mm_set1_epi8(b'0' as i8 - 1)),
            _mm_cmplt_epi8(v, _mm_set1_epi8(b'9' as i8 + 1)),
        );
        let word = _mm_or_si128(
            _mm_or_si128(letter, digit),
            _mm_cmpeq_epi8(v, _mm_set1_epi8(b'_' as i8)),
        );
        let shift = 16 * q;
        masks.word |= (_mm_movemask_epi8(word) as u16 as u64) << shift;
        masks.alpha |= (_mm_movemask_epi8(letter) as u16 as u64) << shift;
        masks.high |= (_mm_movemask_epi8(v) as u16 as u64) << shift;
    }
    masks
}

/// [`block_masks`] byte by byte, from [`ASCII_CLASS`].
fn block_masks_scalar(block: &[u8; 64]) -> BlockMasks {
    let mut masks = BlockMasks::default();
    for (k, &b) in block.iter().enumerate() {
        let class = ASCII_CLASS[b as usize];
        masks.word |= u64::from(class & WORD != 0) << k;
        masks.alpha |= u64::from(class & ALPHA != 0 && b < 0x80) << k;
        masks.high |= u64::from(class & HIGH != 0) << k;
    }
    masks
}

/// The first position at or after `pos` whose bit is set in `bits(mask)`, if any.
#[inline(always)]
fn next_set(masks: &[BlockMasks], pos: usize, bits: impl Fn(&BlockMasks) -> u64) -> Option<usize> {
    let mut w = pos / 64;
    let mut m = bits(masks.get(w)?) & (!0u64 << (pos % 64));
    while m == 0 {
        w += 1;
        m = bits(masks.get(w)?);
    }
    Some(64 * w + m.trailing_zeros() as usize)
}

/// Whether any bit of `alpha` is set in positions `start..end`.
#[inline(always)]
fn any_alpha(masks: &[BlockMasks], start: usize, end: usize) -> bool {
    let (first, last) = (start / 64, (end - 1) / 64);
    let top = end - 64 * last; // 1..=64
    let below_end = if top == 64 { !0 } else { (1u64 << top) - 1 };
    let from_start = !0u64 << (start % 64);
    if first == last {
        return masks[first].alpha & from_start & below_end != 0;
    }
    masks[first].alpha & from_start != 0
        || masks[first + 1..last].iter().any(|m| m.alpha != 0)
        || masks[last].alpha & below_end != 0
}

/// The tokens of a document, lower-cased and joined by single spaces, with room after them:
/// the bytes after [`TokenBuffer::as_bytes`] in [`TokenBuffer::padded`] (at least 16) hold
/// leftovers, so that short tokens can be copied and read with whole-word loads.
#[derive(Default, Debug, Clone)]
pub struct TokenBuffer {
    bytes: Vec<u8>,
    len: usize,
}

/// Bytes kept writable after the end of a [`TokenBuffer`].
const SLACK: usize = 32;

impl TokenBuffer {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn clear(&mut self) {
        self.len = 0;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The joined tokens (valid UTF-8).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// The joined tokens as text.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).expect("tokens are UTF-8")
    }

    /// The joined tokens followed by at least 16 more bytes of any value.
    pub fn padded(&self) -> &[u8] {
        &self.bytes
    }

    /// Makes room for `extra` more bytes plus the slack.
    #[inline(always)]
    fn reserve(&mut self, extra: usize) {
        if self.bytes.len() < self.len + extra + SLACK {
            self.grow(extra);
        }
    }

    #[cold]
    fn grow(&mut self, extra: usize) {
        let want = (self.len + extra + SLACK)
            .max(2 * self.bytes.len())
            .max(4096);
        self.bytes.resize(want, 0);
    }

    /// Starts a new token: a space unless the buffer is empty. Returns its start.
    #[inline(always)]
    fn begin_token(&mut self, len: usize) -> usize {
        self.reserve(len + 1);
        if self.len != 0 {
            self.bytes[self.len] = b' ';
            self.len += 1;
        }
        self.len
    }

    fn push_str(&mut self, text: &str) {
        self.reserve(text.len());
        self.bytes[self.len..self.len + text.len()].copy_from_slice(text.as_bytes());
        self.len += text.len();
    }

    /// Appends bytes of ASCII `text[start..end]`, lower-cased.
    #[inline(always)]
    fn push_ascii_lowercase(&mut self, text: &[u8], start: usize, end: usize) {
        let len = end - start;
        let at = self.len;
        match text.get(start..start + 16) {
            Some(window) if len <= 16 => {
                // One 16-byte copy; what lands after the token is overwritten later or
                // is slack.
                let mut chunk = [0u8; 16];
                chunk.copy_from_slice(window);
                chunk.make_ascii_lowercase();
                self.bytes[at..at + 16].copy_from_slice(&chunk);
            }
            _ => {
                let dest = &mut self.bytes[at..at + len];
                dest.copy_from_slice(&text[start..end]);
                dest.make_ascii_lowercase();
            }
        }
        self.len += len;
    }
}

/// One token as the tokenizer hands it out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token<'a> {
    /// The lower-cased token.
    pub text: &'a str,
    /// Whether the token holds at least one alphabetic character.
    pub has_alpha: bool,
}

/// Splits text into lower-cased tokens. Holds reusable buffers, so one tokenizer per
/// thread tokenizes any number of documents without allocating per token.
#[derive(Default, Debug, Clone)]
pub struct Tokenizer {
    /// The current token of the general (non-ASCII) path, before lower-casing.
    raw: String,
    /// The class masks of the current text, 64 bytes each.
    masks: Vec<BlockMasks>,
    /// How the masks are computed on this processor.
    simd: Simd,
    /// The tokens of [`Tokenizer::for_each_token`], joined, and their spans.
    joined: TokenBuffer,
    spans: Vec<(usize, usize, bool)>,
}

impl Tokenizer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Calls `f` for every token of `text`, in order.
    pub fn for_each_token(&mut self, text: &str, mut f: impl FnMut(Token<'_>)) {
        let mut joined = std::mem::take(&mut self.joined);
        let mut spans = std::mem::take(&mut self.spans);
        joined.clear();
        spans.clear();
        self.tokenize_into(text, &mut joined, |start, end, has_alpha| {
            spans.push((start, end, has_alpha))
        });
        let all = joined.as_bytes();
        for &(start, end, has_alpha) in &spans {
            let text = std::str::from_utf8(&all[start..end]).expect("tokens are UTF-8");
            f(Token { text, has_alpha });
        }
        self.joined = joined;
        self.spans = spans;
    }

    /// Appends every token of `text`, lower-cased, to `joined`, separated by single spaces
    /// (and after a space if `joined` is not empty), and calls `f(start, end, has_alpha)`
    /// for each, with `start..end` its bytes in `joined`.
    ///
    /// Class bit masks of 64 bytes at a time find the runs of ASCII word bytes, which are
    /// copied and lower-cased 16 bytes at a time; a token that holds a non-ASCII character
    /// goes through the general path (Unicode categories, Cf dropped, `str::to_lowercase`
    /// of the whole token).
    pub fn tokenize_into(
        &mut self,
        text: &str,
        joined: &mut TokenBuffer,
        mut f: impl FnMut(usize, usize, bool),
    ) {
        let bytes = text.as_bytes();
        let n = bytes.len();
        self.masks.clear();
        push_masks(self.simd, bytes, &mut self.masks);
        let masks = std::mem::take(&mut self.masks);
        let mut pos = 0;
        while let Some(start) = next_set(&masks, pos, |m| m.word | m.high) {
            if start >= n {
                break;
            }
            if bytes[start] >= 0x80 {
                let ch = text[start..].chars().next().unwrap_or_default();
                pos = if class_of(ch, char_cache()) & WORD == 0 {
                    // A separator, or a Cf character outside any token.
                    start + ch.len_utf8()
                } else {
                    self.general_token(text, start, joined, &mut f)
                };
                continue;
            }
            let end = next_set(&masks, start, |m| !m.word).unwrap_or(n).min(n);
            if end < n && bytes[end] >= 0x80 {
                // The token may go on with a non-ASCII character (or a Cf one).
                pos = self.general_token(text, start, joined, &mut f);
                continue;
            }
            let at = joined.begin_token(end - start);
            joined.push_ascii_lowercase(bytes, start, end);
            f(at, joined.len, any_alpha(&masks, start, end));
            pos = end;
        }
        self.masks = masks;
    }

    /// The general path for the token that starts at byte `start` of `text`: returns the
    /// offset after the character that ended it.
    #[cold]
    fn general_token(
        &mut self,
        text: &str,
        start: usize,
        joined: &mut TokenBuffer,
        f: &mut impl FnMut(usize, usize, bool),
    ) -> usize {
        let cache = char_cache();
        self.raw.clear();
        let mut has_alpha = false;
        let mut ascii_only = true;
        let mut end = text.len();
        for (offset, ch) in text[start..].char_indices() {
            let bits = class_of(ch, cache);
            if bits & WORD != 0 {
                self.raw.push(ch);
                has_alpha |= bits & ALPHA != 0;
                ascii_only &= ch.is_ascii();
            } else if bits & IGNORED == 0 {
                end = start + offset + ch.len_utf8();
                break;
            }
        }
        if self.raw.is_empty() {
            return end;
        }
        let at = joined.begin_token(self.raw.len());
        if ascii_only {
            self.raw.make_ascii_lowercase();
            joined.push_str(&self.raw);
        } else {
            // The full mapping can change length and depends on context (final sigma),
            // so it runs on the whole token, as `str::to_lowercase` defines it.
            joined.push_str(&self.raw.to_lowercase());
        }
        f(at, joined.len, has_alpha);
        end
    }

    /// The tokens of `text` as owned strings (convenient in tests and tools).
    pub fn tokens(&mut self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        self.for_each_token(text, |t| out.push(t.text.to_string()));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The tokenizer as the scheme defines it, character by character: the oracle of the
    /// fast paths.
    fn reference_tokens(text: &str) -> Vec<(String, bool)> {
        let mut out = Vec::new();
        let mut raw = String::new();
        let (mut has_alpha, mut ascii_only) = (false, true);
        let mut emit = |raw: &mut String, has_alpha: bool, ascii_only: bool| {
            if !raw.is_empty() {
                let lowered = if ascii_only {
                    raw.to_ascii_lowercase()
                } else {
                    raw.to_lowercase()
                };
                out.push((lowered, has_alpha));
                raw.clear();
            }
        };
        for ch in text.chars() {
            match classify(ch) {
                CharClass::Word => {
                    raw.push(ch);
                    has_alpha |= ch.is_alphabetic();
                    ascii_only &= ch.is_ascii();
                }
                CharClass::Ignored => {}
                CharClass::Separator => {
                    emit(&mut raw, has_alpha, ascii_only);
                    has_alpha = false;
                    ascii_only = true;
                }
            }
        }
        emit(&mut raw, has_alpha, ascii_only);
        out
    }

    fn fast_tokens(tokenizer: &mut Tokenizer, text: &str) -> Vec<(String, bool)> {
        let mut out = Vec::new();
        tokenizer.for_each_token(text, |t| out.push((t.text.to_string(), t.has_alpha)));
        out
    }

    /// Characters that exercise every path: ASCII letters, digits, `_` and separators;
    /// accented letters; Cf (soft hyphen, zero-width space, BOM, U+E0001 beyond the cache);
    /// combining marks (Mn) and a spacing mark (Mc); Greek capital sigma (final sigma); `İ`
    /// (lower-cases to two characters); letters, digits and punctuation beyond the cache
    /// (CJK, Hangul, Devanagari digits, fullwidth forms, a supplementary-plane letter); No,
    /// Nl and unassigned code points; NUL and other controls.
    const ALPHABET: &[char] = &[
        'a',
        'Z',
        'q',
        'E',
        '0',
        '9',
        '_',
        ' ',
        '-',
        '.',
        '\'',
        '\n',
        '\t',
        '\u{0}',
        '\u{7f}',
        'é',
        'Ü',
        'ß',
        'Σ',
        'σ',
        'ς',
        'Ο',
        'Δ',
        'İ',
        'ı',
        'Ⱥ',
        'ǅ',
        '\u{ad}',
        '\u{200b}',
        '\u{feff}',
        '\u{e0001}',
        '\u{301}',
        '\u{308}',
        '\u{903}',
        '\u{a0}',
        '—',
        '’',
        '“',
        '中',
        '文',
        '한',
        '\u{966}',
        'ｆ',
        'Ａ',
        '１',
        '。',
        '\u{10400}',
        '²',
        'Ⅻ',
        '\u{378}',
        '\u{3000}',
        '\u{33ff}',
        '\u{3400}',
        'ǈ',
        'ʰ',
        '‿',
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn fast_paths_match_the_definition(
            picks in proptest::collection::vec(0..ALPHABET.len(), 0..200)
        ) {
            let text: String = picks.iter().map(|&i| ALPHABET[i]).collect();
            let mut tokenizer = Tokenizer::new();
            prop_assert_eq!(fast_tokens(&mut tokenizer, &text), reference_tokens(&text));
            // A reused tokenizer gives the same.
            prop_assert_eq!(fast_tokens(&mut tokenizer, &text), reference_tokens(&text));
        }

        #[test]
        fn fast_paths_match_the_definition_on_any_text(text in "\\PC{0,150}|[ -~]{0,150}") {
            prop_assert_eq!(fast_tokens(&mut Tokenizer::new(), &text), reference_tokens(&text));
        }
    }

    #[test]
    fn cache_matches_the_general_categories() {
        let cache = char_cache();
        for cp in 0..0x11_0000u32 {
            if let Some(ch) = char::from_u32(cp) {
                assert_eq!(class_of(ch, cache), char_bits(ch), "U+{cp:04X}");
                if ch.is_ascii() {
                    let ascii = ASCII_CLASS[cp as usize];
                    assert_eq!(ascii, char_bits(ch), "U+{cp:04X}");
                }
            }
        }
        assert!(ASCII_CLASS[0x80..].iter().all(|&class| class == HIGH));
    }

    #[test]
    fn joined_tokens_and_offsets() {
        let mut joined = TokenBuffer::new();
        joined.push_str("x");
        let mut seen = Vec::new();
        Tokenizer::new().tokenize_into("Ab, c\u{ad}D 42 ÉTÉ", &mut joined, |s, e, alpha| {
            seen.push((s, e, alpha))
        });
        assert_eq!(joined.as_str(), "x ab cd 42 été");
        assert_eq!(
            seen,
            [(2, 4, true), (5, 7, true), (8, 10, false), (11, 16, true)]
        );
        assert!(joined.padded().len() >= joined.len() + 16);
    }

    #[test]
    fn block_masks_match_the_class_table() {
        let mut state = 9u64;
        for round in 0..300 {
            let mut block = [0u8; 64];
            for (k, b) in block.iter_mut().enumerate() {
                *b = if round < 4 {
                    (64 * round + k) as u8
                } else {
                    crate::mix::splitmix64(&mut state) as u8
                };
            }
            let expected = block_masks_scalar(&block);
            for simd in [Simd::Avx512, Simd::Avx2, Simd::Sse2, Simd::Scalar] {
                if simd.available() {
                    let mut got = Vec::new();
                    push_masks(simd, &block, &mut got);
                    assert_eq!(got, [expected], "{simd:?} on {block:?}");
                }
            }
        }
    }

    #[test]
    fn every_instruction_set_masks_texts_of_every_length_alike() {
        // Lengths around the block size, so the zero padding of the last block is covered.
        let mut state = 17u64;
        for len in [0, 1, 31, 32, 33, 63, 64, 65, 127, 128, 129, 1000] {
            let bytes: Vec<u8> = (0..len)
                .map(|_| crate::mix::splitmix64(&mut state) as u8)
                .collect();
            let mut expected = Vec::new();
            push_masks(Simd::Scalar, &bytes, &mut expected);
            for simd in [Simd::Avx512, Simd::Avx2, Simd::Sse2] {
                if simd.available() {
                    let mut got = Vec::new();
                    push_masks(simd, &bytes, &mut got);
                    assert_eq!(got, expected, "{simd:?}, {len} bytes");
                }
            }
        }
    }

    #[test]
    fn long_texts_and_tokens_cross_blocks() {
        let mut text = String::new();
        for i in 0..200 {
            text.push_str(&"AbC".repeat(i % 30));
            text.push_str(["", " ", "é", "\u{ad}", "--", "9", "Σ "][i % 7]);
        }
        let mut tokenizer = Tokenizer::new();
        assert_eq!(fast_tokens(&mut tokenizer, &text), reference_tokens(&text));
        assert_eq!(
            fast_tokens(&mut tokenizer, &text[5..]),
            reference_tokens(&text[5..])
        );
    }

    fn alpha_tokens(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        Tokenizer::new().for_each_token(text, |t| {
            if t.has_alpha {
                out.push(t.text.to_string())
            }
        });
        out
    }

    #[test]
    fn golden_token_lists() {
        assert_eq!(
            alpha_tokens("The quick brown fox jumps over the lazy dog."),
            ["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog"]
        );
        assert_eq!(
            alpha_tokens("Ünïcödé façade — naïve café 123 4u2 x_y"),
            ["ünïcödé", "façade", "naïve", "café", "4u2", "x_y"]
        );
        assert_eq!(
            alpha_tokens("co\u{00AD}operate co\u{200B}operate"),
            ["cooperate", "cooperate"]
        );
        assert!(alpha_tokens("2024 12345 42").is_empty());
    }

    #[test]
    fn numbers_are_tokens_without_alpha() {
        let mut seen = Vec::new();
        Tokenizer::new().for_each_token("in 2024, 4u2", |t| {
            seen.push((t.text.to_string(), t.has_alpha))
        });
        assert_eq!(
            seen,
            [
                ("in".into(), true),
                ("2024".into(), false),
                ("4u2".into(), true)
            ]
        );
    }

    #[test]
    fn lowercasing_is_the_full_mapping() {
        // Final sigma: whole-token lower-casing, as str::to_lowercase does.
        assert_eq!(alpha_tokens("ΟΔΟΣ"), ["\u{3bf}\u{3b4}\u{3bf}\u{3c2}"]);
        assert_eq!(alpha_tokens("ΟΔΟΣ"), ["ΟΔΟΣ".to_lowercase()]);
        // İ lower-cases to two characters.
        assert_eq!(alpha_tokens("İstanbul"), ["İstanbul".to_lowercase()]);
    }

    #[test]
    fn combining_marks_stay_inside_tokens() {
        // "e" + U+0301 COMBINING ACUTE (Mn) is one token.
        assert_eq!(alpha_tokens("cafe\u{301} bar"), ["cafe\u{301}", "bar"]);
    }

    #[test]
    fn separators_split() {
        assert_eq!(
            alpha_tokens("a-b c.d e'f g\u{00A0}h"),
            ["a", "b", "c", "d", "e", "f", "g", "h"]
        );
    }
}
