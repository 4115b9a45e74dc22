//! TEMPORARY shim with the agreed API, replaced by the html branch at merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum HtmlMode {
    Text,
    Main,
    None,
}
impl HtmlMode {
    pub fn name(self) -> &'static str {
        match self {
            HtmlMode::Text => "text",
            HtmlMode::Main => "main",
            HtmlMode::None => "none",
        }
    }
    pub fn parse(s: &str) -> Option<HtmlMode> {
        match s {
            "text" => Some(HtmlMode::Text),
            "main" => Some(HtmlMode::Main),
            "none" => Some(HtmlMode::None),
            _ => None,
        }
    }
}
pub const DEFAULT_HTML_MODE: HtmlMode = HtmlMode::Text;
pub struct Decoded {
    pub text: String,
    pub charset: &'static str,
    pub replacements: u64,
}
pub fn decode(bytes: &[u8], _declared: Option<&str>, _is_html: bool) -> Decoded {
    let text = String::from_utf8_lossy(bytes).into_owned();
    Decoded {
        replacements: text.matches('\u{FFFD}').count() as u64,
        text,
        charset: "UTF-8",
    }
}
#[derive(Default)]
pub struct Extracted {
    pub title: Option<String>,
    pub text: String,
}
pub fn extract(html: &str, _mode: HtmlMode, out: &mut Extracted) {
    out.text.clear();
    let mut tag = false;
    for c in html.chars() {
        if c == '<' {
            tag = true
        } else if c == '>' {
            tag = false;
            out.text.push(' ')
        } else if !tag {
            out.text.push(c)
        }
    }
}
pub struct Document {
    pub text: String,
    pub title: Option<String>,
    pub charset: &'static str,
    pub replacements: u64,
}
pub fn html_document(bytes: &[u8], _content_type: Option<&str>, mode: HtmlMode) -> Document {
    let d = decode(bytes, None, true);
    let mut e = Extracted::default();
    extract(&d.text, mode, &mut e);
    Document {
        text: e.text,
        title: e.title,
        charset: d.charset,
        replacements: d.replacements,
    }
}
pub fn media_type(content_type: &str) -> &str {
    content_type.split(';').next().unwrap_or("").trim()
}
pub fn is_html_type(mt: &str) -> bool {
    mt.eq_ignore_ascii_case("text/html") || mt.eq_ignore_ascii_case("application/xhtml+xml")
}
pub fn is_text_type(mt: &str) -> bool {
    mt.eq_ignore_ascii_case("text/plain")
}
pub fn looks_binary(bytes: &[u8]) -> bool {
    bytes.iter().take(4096).any(|&b| b == 0)
}
