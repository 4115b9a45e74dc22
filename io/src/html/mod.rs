//! Web payloads to the text neardup fingerprints: bytes to UTF-8, then HTML to text.
//!
//! ```
//! use neardup_io::html::{html_document, HtmlMode};
//!
//! let page = b"<html><head><title>Caf\xe9</title><script>var x;</script></head>\
//!              <body><p>Menu &amp; prices</p><p>Open <b>daily</b></p></body></html>";
//! let doc = html_document(page, Some("text/html; charset=ISO-8859-1"), HtmlMode::Text);
//! assert_eq!(doc.title.as_deref(), Some("Café"));
//! assert_eq!(doc.text, "Menu & prices\nOpen daily");
//! assert_eq!((doc.charset, doc.replacements), ("windows-1252", 0));
//! ```
//!
//! Two steps, each usable alone:
//!
//! 1. [`charset`]: [`decode`] turns bytes into UTF-8 by the WHATWG rules (byte order mark,
//!    then the Content-Type charset, then the `<meta>` prescan, then detection with
//!    chardetng), never failing: malformed bytes become U+FFFD and are counted.
//! 2. [`extract`] turns HTML into text by the [`HtmlMode`]: `text` keeps every visible text
//!    ([`text`] has the rules), `main` also drops boilerplate ([`main_content`] has its
//!    rules), `none` keeps the HTML as it is.
//!
//! [`html_document`] does both for one payload given its Content-Type; [`media_type`],
//! [`is_html_type`], [`is_text_type`] and [`looks_binary`] help a reader decide what a
//! payload is before that.
//!
//! **The parser.** html5ever's tokenizer alone, no tree builder: it decodes character
//! references and knows raw-text elements and comments the WHATWG way, and the extractor
//! keeps a flat stack of open elements instead of a tree, so depth costs no recursion and
//! no stack. lol_html was measured too (docs/inputs.md): its bare text pass is faster, but
//! it reports an end tag only through a boxed `'static` handler registered per element,
//! never for an element closed implicitly, and hands text over undecoded, so the extractor
//! would need its own entity decoder and could not tell where a `<head>` without `</head>`
//! ends.

pub mod charset;
pub mod main_content;
pub mod template;
pub mod text;

pub use charset::{decode, Decoded};
pub use template::{HostTemplate, SiteTemplates};

/// How HTML becomes text (`--html text|main|none`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HtmlMode {
    /// Every visible text ([`text`]).
    Text,
    /// Visible text without boilerplate ([`main_content`]).
    Main,
    /// The HTML as it is, decoded only.
    None,
}

impl HtmlMode {
    /// Every mode, in the order the help lists them.
    pub const ALL: [HtmlMode; 3] = [HtmlMode::Text, HtmlMode::Main, HtmlMode::None];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            HtmlMode::Text => "text",
            HtmlMode::Main => "main",
            HtmlMode::None => "none",
        }
    }

    /// The mode of a command-line name (exact, lower case), if any.
    pub fn parse(s: &str) -> Option<HtmlMode> {
        HtmlMode::ALL.into_iter().find(|mode| mode.name() == s)
    }
}

/// The mode used unless `--html` says otherwise: `main`. Measured on the shared web-archive
/// samples (docs/inputs.md, "HTML to text"): with `main`, the 20 pairs of captures of one
/// page agree more (mean 5-shingle Jaccard 0.958 against 0.943 with `text`; 5 pairs
/// become identical texts, which the exact stage folds, against none; mean simhash
/// distance 0.7 bits against 1.6), and the 864 pairs of different pages of one site, which
/// share a template, drift apart (mean Jaccard 0.022 against 0.071, mean distance 28.2
/// bits against 24.4).
pub const DEFAULT_HTML_MODE: HtmlMode = HtmlMode::Main;

/// How a reader turns pages into text: `--html`, and the site templates the run learned.
#[derive(Debug, Clone)]
pub struct HtmlRules {
    pub mode: HtmlMode,
    pub templates: Option<template::SharedTemplates>,
}

impl HtmlRules {
    /// The template of the page at `url`: empty without templates or outside `main` mode.
    pub fn template(&self, url: Option<&str>) -> HostTemplate<'_> {
        match (&self.templates, self.mode) {
            (Some(t), HtmlMode::Main) => t.of_url(url),
            _ => HostTemplate::NONE,
        }
    }
}

/// A document extracted from HTML.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Extracted {
    /// The first `<title>` outside `svg`/`math`, whitespace collapsed; `None` if there is
    /// none or it is empty.
    pub title: Option<String>,
    /// The text: lines separated by `\n`, no empty lines, whitespace collapsed.
    pub text: String,
}

/// HTML (already UTF-8) to text. Reuses `out`'s buffers. `HtmlMode::None` copies the input.
pub fn extract(html: &str, mode: HtmlMode, out: &mut Extracted) {
    extract_with(html, mode, HostTemplate::NONE, out)
}

/// [`extract`], less the lines of the page's site template ([`template`]) in `text` and
/// `main` modes.
pub fn extract_with(html: &str, mode: HtmlMode, template: HostTemplate<'_>, out: &mut Extracted) {
    match mode {
        HtmlMode::None => {
            out.text.clear();
            out.text.push_str(html);
            out.title = None;
        }
        HtmlMode::Text => text::extract_text(html, text::Rules::Text, template, out),
        HtmlMode::Main => {
            text::extract_text(html, text::Rules::Main, template, out);
            // Rule 7 of main_content: a page whose main content is (nearly) nothing keeps
            // what is outside its boilerplate, short and linked blocks included; a page
            // with nothing there either keeps its visible text. Its site template is
            // dropped in both.
            if out.text.len() < main_content::MIN_MAIN_BYTES {
                text::extract_text(html, text::Rules::MainStructure, template, out);
                if out.text.is_empty() {
                    text::extract_text(html, text::Rules::Text, template, out);
                }
            }
        }
    }
}

/// One payload as text: what [`html_document`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    pub text: String,
    pub title: Option<String>,
    /// The WHATWG name of the character set the bytes were decoded with.
    pub charset: &'static str,
    /// Malformed byte sequences replaced by U+FFFD.
    pub replacements: u64,
}

/// The whole step for one payload: decode, then extract if it is HTML. `content_type` is
/// the HTTP (or WARC) Content-Type value if any: its media type says whether the payload is
/// HTML (when absent, the payload is HTML if its first bytes look like it, see
/// [`sniff_html`]), its `charset` parameter is the declared character set. A payload that
/// is not HTML is decoded only (`title` is `None`).
pub fn html_document(bytes: &[u8], content_type: Option<&str>, mode: HtmlMode) -> Document {
    let mut decoded = String::new();
    let mut out = Extracted::default();
    let (charset, replacements) = html_document_into(
        bytes,
        content_type,
        mode,
        HostTemplate::NONE,
        &mut decoded,
        &mut out,
    );
    Document {
        text: out.text,
        title: out.title,
        charset,
        replacements,
    }
}

/// [`html_document`] with reused buffers, less the page's site `template`: `decoded` holds
/// the decoded payload afterwards, `out` the text and title. Returns the charset and the
/// number of replacements.
pub fn html_document_into(
    bytes: &[u8],
    content_type: Option<&str>,
    mode: HtmlMode,
    template: HostTemplate<'_>,
    decoded: &mut String,
    out: &mut Extracted,
) -> (&'static str, u64) {
    let is_html = match content_type {
        Some(value) => is_html_type(media_type(value)),
        None => sniff_html(bytes),
    };
    let declared = content_type.and_then(charset_param);
    let (charset, replacements) = charset::decode_into(bytes, declared, is_html, decoded);
    if is_html {
        extract_with(decoded, mode, template, out);
    } else {
        out.text.clear();
        out.text.push_str(decoded);
        out.title = None;
    }
    (charset, replacements)
}

/// The media type of a Content-Type value, without parameters and surrounding whitespace
/// ("text/html" of "Text/HTML; charset=utf-8" is "Text/HTML": compare it ignoring ASCII
/// case, as [`is_html_type`] and [`is_text_type`] do; lower-casing would need a copy).
pub fn media_type(content_type: &str) -> &str {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim_matches(|c: char| c.is_ascii_whitespace())
}

/// Whether a media type is HTML or XHTML (ASCII case ignored).
pub fn is_html_type(mt: &str) -> bool {
    mt.eq_ignore_ascii_case("text/html") || mt.eq_ignore_ascii_case("application/xhtml+xml")
}

/// Whether a media type is plain text (ASCII case ignored): `text/plain`.
pub fn is_text_type(mt: &str) -> bool {
    mt.eq_ignore_ascii_case("text/plain")
}

/// The `charset` parameter of a Content-Type value, quotes removed, if any.
pub fn charset_param(content_type: &str) -> Option<&str> {
    content_type.split(';').skip(1).find_map(|param| {
        let (name, value) = param.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| value.trim().trim_matches(|c| c == '"' || c == '\''))
            .filter(|value| !value.is_empty())
    })
}

/// How many bytes [`looks_binary`] and [`sniff_html`] look at: 4 KiB, enough for the
/// header of any binary format and for the doctype and `<html>` of any page.
pub const SNIFF_BYTES: usize = 4096;

/// The share of control bytes (in tenths of a percent) above which a payload is binary:
/// 1%. Text in any single-byte or multi-byte charset has none but tab, line feed, form feed,
/// carriage return and escape (ISO-2022); a PDF, an image or a zip has several percent.
pub const MAX_CONTROL_PER_MILLE: usize = 10;

/// The share of control bytes (in tenths of a percent) above which a payload labelled HTML
/// is binary: 10%. Browsers show an HTML page whatever stray control bytes it holds (a
/// 560-byte spam page with 1.8% of them was skipped under the 1% of plain text). Measured
/// with `scripts/bench/control_bytes.py` on every archive at hand (the shared Common Crawl
/// and Wayback samples, 13 crawled sites: 9,656 payloads labelled HTML): no HTML payload has
/// a NUL or any control byte in its first 4 KiB, while every payload with a binary
/// signature (PDF, images) has a NUL there, and 2 to 11% of control bytes.
pub const MAX_CONTROL_HTML_PER_MILLE: usize = 100;

/// Whether bytes labelled text look binary: a NUL byte in the first [`SNIFF_BYTES`] (unless
/// a UTF-16 byte order mark explains it), or more than [`MAX_CONTROL_PER_MILLE`] per mille
/// of the WHATWG "binary data bytes" (the C0 controls other than tab, line feed, form
/// feed, carriage return and escape). Readers skip such payloads as "not text".
pub fn looks_binary(bytes: &[u8]) -> bool {
    looks_binary_within(bytes, MAX_CONTROL_PER_MILLE)
}

/// [`looks_binary`] for a payload labelled HTML (`is_html`), which may hold up to
/// [`MAX_CONTROL_HTML_PER_MILLE`] of control bytes, or labelled plain text.
pub fn looks_binary_labelled(bytes: &[u8], is_html: bool) -> bool {
    match is_html {
        true => looks_binary_within(bytes, MAX_CONTROL_HTML_PER_MILLE),
        false => looks_binary(bytes),
    }
}

fn looks_binary_within(bytes: &[u8], max_per_mille: usize) -> bool {
    let head = &bytes[..bytes.len().min(SNIFF_BYTES)];
    if head.is_empty() {
        return false;
    }
    if matches!(
        encoding_rs::Encoding::for_bom(head),
        Some((e, _)) if e == encoding_rs::UTF_16LE || e == encoding_rs::UTF_16BE
    ) {
        return false;
    }
    if head.contains(&0) {
        return true;
    }
    let control = head
        .iter()
        .filter(|&&b| matches!(b, 0x01..=0x08 | 0x0b | 0x0e..=0x1a | 0x1c..=0x1f))
        .count();
    control * 1000 > head.len() * max_per_mille
}

/// Whether a payload without a Content-Type is HTML: after whitespace and a byte order
/// mark it starts with `<`, and its first [`SNIFF_BYTES`] hold `<html`, `<!doctype html`,
/// `<head`, `<body` or `<title` (ASCII case ignored).
pub fn sniff_html(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(SNIFF_BYTES)];
    let head = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
    let start = head.iter().position(|b| !b.is_ascii_whitespace());
    if start.is_none_or(|at| head[at] != b'<') {
        return false;
    }
    const MARKS: [&[u8]; 5] = [b"<html", b"<!doctype html", b"<head", b"<body", b"<title"];
    (0..head.len()).filter(|&at| head[at] == b'<').any(|at| {
        MARKS.iter().any(|mark| {
            head.len() - at >= mark.len() && head[at..at + mark.len()].eq_ignore_ascii_case(mark)
        })
    })
}

#[cfg(test)]
mod tests;
