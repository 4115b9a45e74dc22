//! The direct scanner of the common lines. Every function returns `None` as soon as the
//! line is not of the simple kind it reads (or is not valid JSON): the caller then hands
//! the line to serde_json (`serde_path`), so results and error messages are the same either
//! way.

use crate::record::{FieldSpec, Record};

const QUOTES: u64 = 0x2222_2222_2222_2222;
const BACKSLASHES: u64 = 0x5c5c_5c5c_5c5c_5c5c;
const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Bytes of `x` that are zero get their high bit set (exact for the lowest one).
#[inline(always)]
fn zero_bytes(x: u64) -> u64 {
    x.wrapping_sub(ONES) & !x & HIGHS
}

/// The offset of the first `"`, `\` or control character (below 0x20) at or after
/// `i`, or `bytes.len()`.
#[inline]
fn next_special(bytes: &[u8], mut i: usize) -> usize {
    while i + 8 <= bytes.len() {
        let x = u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap());
        // Below 0x20: x - 0x20 borrows, for bytes that are not >= 0x80.
        let control = x.wrapping_sub(0x2020_2020_2020_2020) & !x & HIGHS;
        let hits = zero_bytes(x ^ QUOTES) | zero_bytes(x ^ BACKSLASHES) | control;
        if hits != 0 {
            return i + (hits.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < bytes.len() && !matches!(bytes[i], b'"' | b'\\' | 0..=0x1f) {
        i += 1;
    }
    i
}

#[inline]
fn skip_ws(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() && matches!(bytes[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

fn hex4(bytes: &[u8], i: usize) -> Option<u32> {
    let digits = bytes.get(i..i + 4)?;
    let mut v = 0;
    for &d in digits {
        v = v * 16 + (d as char).to_digit(16)?;
    }
    Some(v)
}

/// Reads the string whose opening quote is at `i - 1`, unescaped into `out` if given;
/// returns the offset after the closing quote.
fn string(text: &str, mut i: usize, mut out: Option<&mut String>) -> Option<usize> {
    let bytes = text.as_bytes();
    loop {
        let j = next_special(bytes, i);
        if let Some(out) = out.as_deref_mut() {
            out.push_str(text.get(i..j)?);
        }
        match *bytes.get(j)? {
            b'"' => return Some(j + 1),
            b'\\' => {}
            _ => return None, // a control character
        }
        let unescaped = match *bytes.get(j + 1)? {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let first = hex4(bytes, j + 2)?;
                if (0xd800..0xdc00).contains(&first) {
                    // A surrogate pair, written as two escapes.
                    if bytes.get(j + 6..j + 8)? != b"\\u" {
                        return None;
                    }
                    let second = hex4(bytes, j + 8)?;
                    if !(0xdc00..0xe000).contains(&second) {
                        return None;
                    }
                    i = j + 12;
                    let c = 0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00);
                    if let Some(out) = out.as_deref_mut() {
                        out.push(char::from_u32(c)?);
                    }
                    continue;
                }
                i = j + 6;
                // A lone low surrogate gives None here.
                let c = char::from_u32(first)?;
                if let Some(out) = out.as_deref_mut() {
                    out.push(c);
                }
                continue;
            }
            _ => return None,
        };
        if let Some(out) = out.as_deref_mut() {
            out.push(unescaped);
        }
        i = j + 2;
    }
}

/// Reads a non-negative integer without fraction or exponent that fits a u64 (what
/// serde_json reads as a u64): returns it and the offset after it.
fn unsigned(bytes: &[u8], i: usize) -> Option<(u64, usize)> {
    let mut j = i;
    let mut v: u64 = 0;
    while let Some(d @ b'0'..=b'9') = bytes.get(j) {
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        j += 1;
    }
    let digits = j - i;
    if digits == 0 || (digits > 1 && bytes[i] == b'0') {
        return None;
    }
    if matches!(bytes.get(j), Some(b'.' | b'e' | b'E')) {
        return None;
    }
    Some((v, j))
}

/// Skips a value that is not wanted: strings, plain numbers, booleans and null.
fn skip_value(text: &str, i: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    match *bytes.get(i)? {
        b'"' => string(text, i + 1, None),
        b'-' => unsigned(bytes, i + 1).map(|(_, j)| j),
        b'0'..=b'9' => unsigned(bytes, i).map(|(_, j)| j),
        b't' if bytes[i..].starts_with(b"true") => Some(i + 4),
        b'f' if bytes[i..].starts_with(b"false") => Some(i + 5),
        b'n' if bytes[i..].starts_with(b"null") => Some(i + 4),
        _ => None,
    }
}

/// The id as `serde_path::id_text` writes it, or the text; fills `record`.
pub(super) fn parse(text: &str, spec: &FieldSpec, record: &mut Record) -> Option<()> {
    let bytes = text.as_bytes();
    let mut i = skip_ws(bytes, 0);
    if bytes.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(bytes, i + 1);
    let mut have_text = false;
    let mut id = record.id.take().unwrap_or_default();
    let mut have_id = false;
    record.text.clear();
    loop {
        if bytes.get(i) != Some(&b'"') {
            return None;
        }
        let key_start = i + 1;
        let key_end = next_special(bytes, key_start);
        if bytes.get(key_end) != Some(&b'"') {
            return None; // an escaped key: serde_json unescapes it
        }
        let key = &text[key_start..key_end];
        i = skip_ws(bytes, key_end + 1);
        if bytes.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(bytes, i + 1);
        let is_text = key == spec.text_field;
        let is_id = spec.id_field.as_deref() == Some(key);
        if is_text || is_id {
            match *bytes.get(i)? {
                b'"' => {
                    let target = if is_text { &mut record.text } else { &mut id };
                    target.clear();
                    i = string(text, i + 1, Some(target))?;
                    if is_text && is_id {
                        id.clone_from(&record.text);
                    }
                }
                b'0'..=b'9' if !is_text => {
                    // `unsigned` refuses leading zeros, so the digits as written
                    // are the number as `id_text` would write it: no formatting.
                    let (_, j) = unsigned(bytes, i)?;
                    id.clear();
                    id.push_str(&text[i..j]);
                    i = j;
                }
                _ => return None,
            }
            have_text |= is_text;
            have_id |= is_id;
        } else {
            i = skip_value(text, i)?;
        }
        i = skip_ws(bytes, i);
        match *bytes.get(i)? {
            b',' => i = skip_ws(bytes, i + 1),
            b'}' => break,
            _ => return None,
        }
    }
    if skip_ws(bytes, i + 1) != bytes.len() || !have_text {
        return None;
    }
    match spec.id_field {
        Some(_) if !have_id => return None,
        Some(_) => record.id = Some(id),
        None => record.id = None,
    }
    record.extra = None;
    Some(())
}
