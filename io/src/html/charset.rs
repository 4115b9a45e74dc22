//! Bytes to UTF-8: which character set a payload is in, and decoding it.
//!
//! The rules are the WHATWG ones a browser applies, in this order, the first that gives a
//! known encoding winning:
//!
//! 1. a byte order mark (UTF-8, UTF-16LE, UTF-16BE), which is also removed;
//! 2. the `charset` parameter of the HTTP (or WARC) Content-Type, as cut out by the caller;
//! 3. for HTML only, the `<meta charset>` / `<meta http-equiv="Content-Type"
//!    content="...; charset=...">` found by the WHATWG *prescan* of the first
//!    [`PRESCAN_BYTES`] bytes (a meta that names UTF-16 means UTF-8, as the spec says: a page
//!    that could be read far enough to find it is not UTF-16);
//! 4. detection: bytes that are valid UTF-8 are UTF-8 (checked with `simdutf8`, the whole
//!    payload), otherwise [chardetng](https://docs.rs/chardetng) (Firefox's detector) guesses
//!    from the first [`DETECT_BYTES`] bytes.
//!
//! A label that names no encoding (`charset=foo`, garbage from a broken server) is ignored and
//! the next rule is tried, and so is the WHATWG *replacement* encoding (labels such as
//! `iso-2022-kr`, which a browser decodes to a single U+FFFD for safety): for fingerprinting,
//! detection gives more than one replacement character. Decoding never fails: every malformed
//! sequence becomes U+FFFD and is counted in [`Decoded::replacements`].

use encoding_rs::{DecoderResult, Encoding, UTF_16BE, UTF_16LE, UTF_8, WINDOWS_1252};

/// How many bytes the `<meta>` prescan reads: 1024, the number the WHATWG encoding sniffing
/// algorithm gives a user agent (the spec's prescan stops there too).
pub const PRESCAN_BYTES: usize = 1024;

/// How many bytes chardetng sees when the payload is not valid UTF-8. 64 KiB is far more than
/// chardetng needs to settle on a guess (it looks at byte pairs; pages in the samples settle
/// within their first kilobytes), and keeps a 50 MB page from costing a 50 MB detection pass.
pub const DETECT_BYTES: usize = 64 * 1024;

/// A payload decoded to UTF-8.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// The text, without a byte order mark.
    pub text: String,
    /// The WHATWG name of the encoding used ("UTF-8", "windows-1252", "Shift_JIS", ...).
    pub charset: &'static str,
    /// How many malformed byte sequences were replaced by U+FFFD.
    pub replacements: u64,
}

/// Decodes `bytes` to UTF-8 by the rules in the module documentation. `declared` is the
/// charset of the Content-Type header if any (any label, garbage included); `is_html` turns
/// the `<meta>` prescan on.
pub fn decode(bytes: &[u8], declared: Option<&str>, is_html: bool) -> Decoded {
    let mut text = String::new();
    let (charset, replacements) = decode_into(bytes, declared, is_html, &mut text);
    Decoded {
        text,
        charset,
        replacements,
    }
}

/// [`decode`] into a reused buffer (cleared first): returns the charset and the number of
/// replacements.
pub fn decode_into(
    bytes: &[u8],
    declared: Option<&str>,
    is_html: bool,
    text: &mut String,
) -> (&'static str, u64) {
    let (encoding, body) = choose(bytes, declared, is_html);
    let replacements = decode_with(encoding, body, text);
    (encoding.name(), replacements)
}

/// The encoding of `bytes` and the bytes to decode with it (the byte order mark removed).
pub fn choose<'a>(
    bytes: &'a [u8],
    declared: Option<&str>,
    is_html: bool,
) -> (&'static Encoding, &'a [u8]) {
    if let Some((encoding, bom)) = Encoding::for_bom(bytes) {
        return (encoding, &bytes[bom..]);
    }
    if let Some(encoding) = declared.and_then(|label| usable(label.as_bytes())) {
        return (encoding, bytes);
    }
    if is_html {
        if let Some(encoding) = prescan(&bytes[..bytes.len().min(PRESCAN_BYTES)]) {
            return (encoding, bytes);
        }
    }
    (detect(bytes), bytes)
}

/// The encoding a label names, unless it names none or the replacement encoding.
fn usable(label: &[u8]) -> Option<&'static Encoding> {
    // The label may still be quoted (`charset="utf-8"`): Encoding::for_label trims only
    // ASCII whitespace.
    let label = trim_quotes(label);
    Encoding::for_label(label).filter(|e| *e != encoding_rs::REPLACEMENT)
}

fn trim_quotes(label: &[u8]) -> &[u8] {
    let label = label.trim_ascii();
    let label = label.strip_prefix(b"\"").unwrap_or(label);
    let label = label.strip_suffix(b"\"").unwrap_or(label);
    let label = label.strip_prefix(b"'").unwrap_or(label);
    label.strip_suffix(b"'").unwrap_or(label)
}

/// Rule 4: valid UTF-8 is UTF-8; anything else is chardetng's guess.
fn detect(bytes: &[u8]) -> &'static Encoding {
    if simdutf8::basic::from_utf8(bytes).is_ok() {
        return UTF_8;
    }
    let mut detector = chardetng::EncodingDetector::new(chardetng::Iso2022JpDetection::Deny);
    let head = &bytes[..bytes.len().min(DETECT_BYTES)];
    detector.feed(head, head.len() == bytes.len());
    // The UTF-8 check above saw the whole payload: a UTF-8 guess here would only be right
    // for a page whose damage lies past the detector's window.
    detector.guess(None, chardetng::Utf8Detection::Allow)
}

/// Decodes `body` with `encoding` into `text` (cleared first), each malformed sequence
/// becoming U+FFFD; returns how many there were.
pub fn decode_with(encoding: &'static Encoding, body: &[u8], text: &mut String) -> u64 {
    text.clear();
    if encoding == UTF_8 {
        if let Ok(valid) = simdutf8::basic::from_utf8(body) {
            text.push_str(valid);
            return 0;
        }
    }
    let mut decoder = encoding.new_decoder_without_bom_handling();
    let mut replacements = 0;
    let mut rest = body;
    loop {
        let need = decoder
            .max_utf8_buffer_length_without_replacement(rest.len())
            .unwrap_or(usize::MAX / 2);
        // A malformed sequence stops the decoder early, so at most what the rest needs.
        text.reserve(need.min(rest.len().saturating_mul(3) + 16));
        let (result, read) = decoder.decode_to_string_without_replacement(rest, text, true);
        rest = &rest[read..];
        match result {
            DecoderResult::InputEmpty => return replacements,
            DecoderResult::Malformed(_, _) => {
                text.push('\u{FFFD}');
                replacements += 1;
            }
            // Reserved above for the worst case; reserve again if the estimate was short.
            DecoderResult::OutputFull => text.reserve(rest.len() + 16),
        }
    }
}

/// The WHATWG prescan ("prescan a byte stream to determine its encoding") of the head of an
/// HTML document: the first `<meta>` that names an encoding by `charset`, or by
/// `http-equiv="content-type"` with a `content` holding `charset=`. Comments are skipped,
/// and so are other tags with their attributes (so a `<meta` inside an attribute value does
/// not count).
pub fn prescan(head: &[u8]) -> Option<&'static Encoding> {
    let mut i = 0;
    while i < head.len() {
        if head[i] != b'<' {
            i += 1;
            continue;
        }
        let rest = &head[i..];
        if rest.starts_with(b"<!--") {
            // The comment may start and end on the same dashes (`<!-->`).
            i = find(&head[i + 2..], b"-->").map_or(head.len(), |at| i + 2 + at + 3);
        } else if rest.len() > 5
            && rest[1..5].eq_ignore_ascii_case(b"meta")
            && (is_space(rest[5]) || rest[5] == b'/')
        {
            let mut at = i + 5;
            let mut http_equiv_content_type = false;
            let mut content: Option<&[u8]> = None;
            let mut charset: Option<&'static Encoding> = None;
            let mut charset_seen = false;
            while let Some((name, value, next)) = attribute(head, at) {
                at = next;
                if name.eq_ignore_ascii_case(b"http-equiv") {
                    http_equiv_content_type |= value.eq_ignore_ascii_case(b"content-type");
                } else if name.eq_ignore_ascii_case(b"content") && content.is_none() {
                    content = Some(value);
                } else if name.eq_ignore_ascii_case(b"charset") && !charset_seen {
                    charset_seen = true;
                    charset = Encoding::for_label(trim_quotes(value));
                }
            }
            let found = if charset_seen {
                charset
            } else if http_equiv_content_type {
                content.and_then(charset_in_content)
            } else {
                None
            };
            if let Some(encoding) = found.filter(|e| *e != encoding_rs::REPLACEMENT) {
                // The spec: a meta naming UTF-16 means UTF-8, x-user-defined windows-1252.
                return Some(if encoding == UTF_16LE || encoding == UTF_16BE {
                    UTF_8
                } else if encoding == encoding_rs::X_USER_DEFINED {
                    WINDOWS_1252
                } else {
                    encoding
                });
            }
            i = at;
        } else if rest.len() > 1 && (rest[1].is_ascii_alphabetic() || rest[1] == b'/') {
            // Another tag: skip its name and attributes.
            let mut at = i + 1 + usize::from(rest[1] == b'/');
            while at < head.len() && !is_space(head[at]) && head[at] != b'>' {
                at += 1;
            }
            while let Some((_, _, next)) = attribute(head, at) {
                at = next;
            }
            i = at;
        } else if rest.starts_with(b"<!") || rest.starts_with(b"</") || rest.starts_with(b"<?") {
            i = memchr(&head[i..], b'>').map_or(head.len(), |at| i + at + 1);
        } else {
            i += 1;
        }
    }
    None
}

/// The WHATWG "get an attribute" step of the prescan, from `at`: the attribute's name and
/// value and the position after it, or `None` at `>` or the end.
fn attribute(head: &[u8], mut at: usize) -> Option<(&[u8], &[u8], usize)> {
    while at < head.len() && (is_space(head[at]) || head[at] == b'/') {
        at += 1;
    }
    if at >= head.len() || head[at] == b'>' {
        return None;
    }
    let name_start = at;
    while at < head.len() && !(is_space(head[at]) || matches!(head[at], b'/' | b'>' | b'=')) {
        at += 1;
    }
    let name = &head[name_start..at];
    while at < head.len() && is_space(head[at]) {
        at += 1;
    }
    if at >= head.len() || head[at] != b'=' {
        return Some((name, &[], at));
    }
    at += 1;
    while at < head.len() && is_space(head[at]) {
        at += 1;
    }
    if at >= head.len() {
        return Some((name, &[], at));
    }
    if matches!(head[at], b'"' | b'\'') {
        let quote = head[at];
        let value_start = at + 1;
        let end = memchr(&head[value_start..], quote).map_or(head.len(), |e| value_start + e);
        return Some((name, &head[value_start..end], (end + 1).min(head.len())));
    }
    let value_start = at;
    while at < head.len() && !is_space(head[at]) && head[at] != b'>' {
        at += 1;
    }
    Some((name, &head[value_start..at], at))
}

/// The WHATWG "extract a character encoding from a meta element": the label after the
/// first `charset` followed by `=` in a `content` value.
fn charset_in_content(content: &[u8]) -> Option<&'static Encoding> {
    let mut at = 0;
    loop {
        let found = find_ignore_case(&content[at..], b"charset")?;
        at += found + 7;
        let mut j = at;
        while j < content.len() && is_space(content[j]) {
            j += 1;
        }
        if j < content.len() && content[j] == b'=' {
            j += 1;
            while j < content.len() && is_space(content[j]) {
                j += 1;
            }
            let value = &content[j..];
            let label = match value.first() {
                Some(&q @ (b'"' | b'\'')) => {
                    let inner = &value[1..];
                    &inner[..memchr(inner, q)?]
                }
                _ => {
                    let end = value
                        .iter()
                        .position(|&b| is_space(b) || b == b';')
                        .unwrap_or(value.len());
                    &value[..end]
                }
            };
            return Encoding::for_label(label);
        }
    }
}

fn is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | b'\x0c' | b'\r' | b' ')
}

fn memchr(hay: &[u8], byte: u8) -> Option<usize> {
    hay.iter().position(|&b| b == byte)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn find_ignore_case(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "café" in windows-1252: é is 0xE9, invalid as UTF-8.
    const CAFE_1252: &[u8] = b"caf\xe9";

    #[test]
    fn bom_beats_the_header_and_is_removed() {
        let mut bytes = b"\xef\xbb\xbf".to_vec();
        bytes.extend_from_slice("café".as_bytes());
        let d = decode(&bytes, Some("windows-1252"), true);
        assert_eq!(
            (d.text.as_str(), d.charset, d.replacements),
            ("café", "UTF-8", 0)
        );
        // UTF-16LE with its BOM.
        let utf16: Vec<u8> = b"\xff\xfe"
            .iter()
            .copied()
            .chain("hé".encode_utf16().flat_map(|u| u.to_le_bytes()))
            .collect();
        let d = decode(&utf16, Some("utf-8"), true);
        assert_eq!((d.text.as_str(), d.charset), ("hé", "UTF-16LE"));
    }

    #[test]
    fn header_beats_meta() {
        let html = b"<html><head><meta charset=\"utf-8\"></head><body>caf\xe9</body></html>";
        let d = decode(html, Some("ISO-8859-1"), true);
        // ISO-8859-1 is windows-1252 by the WHATWG label table.
        assert_eq!(d.charset, "windows-1252");
        assert!(d.text.contains("café"), "{}", d.text);
        assert_eq!(d.replacements, 0);
        // Without the header, the meta decides: 0xE9 is not UTF-8, so one replacement.
        let d = decode(html, None, true);
        assert_eq!((d.charset, d.replacements), ("UTF-8", 1));
        assert!(d.text.contains("caf\u{FFFD}"));
    }

    #[test]
    fn meta_http_equiv_content_type() {
        let html = b"<!-- <meta charset=utf-8> --><META HTTP-EQUIV='Content-Type' \
                     CONTENT='text/html; charset=koi8-r'><p>\xf0\xd2\xc9\xd7\xc5\xd4";
        let d = decode(html, None, true);
        assert_eq!(d.charset, "KOI8-R");
        assert!(d.text.ends_with("Привет"), "{}", d.text);
        // Not HTML: no prescan; the bytes are not UTF-8, so chardetng guesses.
        let d = decode(html, None, false);
        assert_ne!(d.charset, "KOI8-R");
    }

    #[test]
    fn meta_without_http_equiv_or_past_1024_bytes_is_ignored() {
        let html = b"<meta content='text/html; charset=koi8-r'>caf\xe9 au lait";
        assert_eq!(prescan(html), None);
        let mut late = vec![b' '; PRESCAN_BYTES];
        late.extend_from_slice(b"<meta charset=koi8-r>");
        assert_eq!(decode(&late, None, true).charset, "UTF-8");
        // A meta in an attribute value of another tag is not a meta.
        assert_eq!(prescan(b"<a title='<meta charset=koi8-r>'>x</a>"), None);
        // A meta naming UTF-16 means UTF-8.
        assert_eq!(prescan(b"<meta charset=utf-16le>"), Some(UTF_8));
    }

    #[test]
    fn windows_1252_bytes_are_detected() {
        let text = "Les élèves étaient très fâchés: « déjà vu », dit-il à l'été.";
        let (bytes, _, _) = WINDOWS_1252.encode(text);
        let d = decode(&bytes, None, true);
        assert_eq!(d.charset, "windows-1252");
        assert_eq!(d.text, text);
        assert_eq!(d.replacements, 0);
    }

    #[test]
    fn shift_jis_and_gbk_are_detected() {
        let japanese = "日本語のテキストです。これは文字コードの自動判別のためのテストの文章です。";
        let (bytes, _, _) = encoding_rs::SHIFT_JIS.encode(japanese);
        let d = decode(&bytes, None, true);
        assert_eq!((d.charset, d.text.as_str()), ("Shift_JIS", japanese));
        let chinese = "这是一个用于测试字符编码自动检测的中文句子，我们希望它能够被正确识别。";
        let (bytes, _, _) = encoding_rs::GBK.encode(chinese);
        let d = decode(&bytes, None, true);
        assert_eq!((d.charset, d.text.as_str()), ("GBK", chinese));
    }

    #[test]
    fn unknown_labels_fall_through() {
        // An unknown header label: the meta decides.
        let html = b"<meta charset=windows-1251><p>\xcf\xf0\xe8\xe2\xe5\xf2";
        let d = decode(html, Some("no-such-charset"), true);
        assert_eq!(d.charset, "windows-1251");
        assert!(d.text.ends_with("Привет"));
        // An unknown meta label too: detection decides (valid UTF-8 here).
        let d = decode("<meta charset=bogus>héllo".as_bytes(), Some("x-junk"), true);
        assert_eq!((d.charset, d.replacements), ("UTF-8", 0));
        // The replacement encoding is skipped like an unknown label.
        let d = decode(b"plain ascii", Some("iso-2022-kr"), false);
        assert_eq!((d.charset, d.text.as_str()), ("UTF-8", "plain ascii"));
        // A quoted header label is still a label.
        assert_eq!(decode(CAFE_1252, Some("\"latin1\""), false).text, "café");
    }

    #[test]
    fn invalid_utf8_counts_replacements() {
        let bytes = b"ok \xff\xfe then \xc3( and \xe2\x82";
        let d = decode(bytes, Some("utf-8"), false);
        assert_eq!(d.charset, "UTF-8");
        assert_eq!(d.text, "ok \u{FFFD}\u{FFFD} then \u{FFFD}( and \u{FFFD}");
        assert_eq!(d.replacements, 4);
        // A U+FFFD already in the text is not a replacement.
        let d = decode("a \u{FFFD} b".as_bytes(), None, false);
        assert_eq!(d.replacements, 0);
        // The buffer is reused: cleared, never appended to.
        let mut text = String::from("old");
        assert_eq!(decode_into(b"new", None, false, &mut text), ("UTF-8", 0));
        assert_eq!(text, "new");
    }
}
