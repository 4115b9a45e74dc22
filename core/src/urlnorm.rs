//! URL normalization: the many spellings of one page's address reduced to one, so that a
//! recrawl of a page is recognised whatever form its URL took (`http://www.espn.com/` and
//! `https://espn.com`, a link with `?utm_source=...`, `/index.html`).
//!
//! The idea is a fixed list of rewrites, each of which maps URLs that every server treats
//! alike (or that practically always name the same page) to one form. [`UrlNormalize`]
//! picks how far to go:
//!
//! - [`UrlNormalize::None`]: the URL as given (surrounding whitespace trimmed), nothing else.
//! - [`UrlNormalize::Standard`] (the default): rewrites that do not change what a server is
//!   asked for, or change only parameters that do not select content:
//!   1. parsed as a browser does (WHATWG URL Standard, the `url` crate): scheme and host
//!      lower-cased, internationalised hosts in IDNA ASCII form (`bücher.de` becomes
//!      `xn--bcher-kva.de`), default ports dropped (`:80` for http, `:443` for https),
//!      dot segments resolved (`/a/./b/../c` becomes `/a/c`), an empty path made `/`,
//!      characters that must be escaped percent-encoded;
//!   2. a trailing dot of the host dropped (`example.com.`);
//!   3. percent-encoding normalized in the path and the query: escapes of unreserved
//!      characters (letters, digits, `-`, `.`, `_`, `~`; RFC 3986 section 2.3) decoded
//!      (`%7Euser` becomes `~user`), the hex digits of the others upper-cased (`%2f`
//!      becomes `%2F`);
//!   4. the fragment (`#...`) dropped: it is never sent to the server;
//!   5. session ids in path parameters dropped (`/cart;jsessionid=0A1B`);
//!   6. tracking and session query parameters dropped ([`is_dropped_param`]: `utm_*`,
//!      `gclid`, `fbclid`, `jsessionid`, `phpsessid`, `sid`, ...), empty parameters (`a=1&&b=2`)
//!      dropped, the remaining parameters sorted (byte order of `name=value`; equal ones
//!      kept), and a query left empty removed with its `?`.
//! - [`UrlNormalize::Aggressive`]: also rewrites that nearly always, but not always, keep the
//!   page:
//!
//!   7. `https` written as `http` (the two are treated alike);
//!   8. a leading `www.` or `m.` label of the host stripped, repeatedly, as long as what
//!      remains has a dot (`www.m.example.com` becomes `example.com`, `www.com` stays);
//!   9. a last path segment `index.html`, `index.htm`, `index.php`, `default.asp` or
//!      `default.aspx` (any case) dropped, leaving the directory (`/a/index.html` becomes `/a/`).
//!
//! A URL that does not parse (no scheme, a bad host) has no normalized form in `standard`
//! and `aggressive` mode ([`normalize_url`] returns `None`): such a document is paired by
//! content only. Every mode is idempotent: normalizing a normalized URL changes nothing.
//!
//! ```
//! use neardup_core::urlnorm::{normalize_url, UrlNormalize};
//!
//! let url = "HTTPS://WWW.Example.com:443/a/./b/../index.html?utm_source=x&b=2&a=1#top";
//! assert_eq!(
//!     normalize_url(url, UrlNormalize::Standard).as_deref(),
//!     Some("https://www.example.com/a/index.html?a=1&b=2")
//! );
//! assert_eq!(
//!     normalize_url(url, UrlNormalize::Aggressive).as_deref(),
//!     Some("http://example.com/a/?a=1&b=2")
//! );
//! ```

use url::Url;

/// How far URLs are normalized (`--url-normalize`); see the module docs for the rules.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum UrlNormalize {
    /// The URL as given, trimmed.
    None,
    /// Rules 1 to 6: the default.
    #[default]
    Standard,
    /// Rules 1 to 9.
    Aggressive,
}

impl UrlNormalize {
    /// Parses `none`, `standard` or `aggressive`.
    pub fn parse(text: &str) -> Option<UrlNormalize> {
        match text {
            "none" => Some(UrlNormalize::None),
            "standard" => Some(UrlNormalize::Standard),
            "aggressive" => Some(UrlNormalize::Aggressive),
            _ => None,
        }
    }

    /// The name [`UrlNormalize::parse`] reads.
    pub fn name(self) -> &'static str {
        match self {
            UrlNormalize::None => "none",
            UrlNormalize::Standard => "standard",
            UrlNormalize::Aggressive => "aggressive",
        }
    }
}

/// Query parameters that only track a visitor or carry a session, never select content:
/// matched case-insensitively on the decoded name. Prefixes end with `*`.
pub const DROPPED_PARAMS: &[&str] = &[
    "utm_*",         // Google Analytics campaign tags: utm_source, utm_medium, ...
    "gclid",         // Google Ads click id
    "gclsrc",        // Google Ads click source
    "dclid",         // DoubleClick click id
    "fbclid",        // Facebook click id
    "msclkid",       // Microsoft Ads click id
    "yclid",         // Yandex click id
    "mc_cid",        // Mailchimp campaign id
    "mc_eid",        // Mailchimp subscriber id
    "_ga",           // Google Analytics cross-domain linker
    "_hsenc",        // HubSpot
    "_hsmi",         // HubSpot
    "jsessionid",    // Java servlet session
    "phpsessid",     // PHP session
    "aspsessionid*", // classic ASP session (ASPSESSIONIDxxxxxxxx)
    "sid",           // generic session id
    "sessionid",     // generic session id
    "cfid",          // ColdFusion session
    "cftoken",       // ColdFusion session
];

/// True if a query parameter named `name` is a tracking or session parameter
/// ([`DROPPED_PARAMS`]).
pub fn is_dropped_param(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    DROPPED_PARAMS.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == *p,
    })
}

/// Host labels stripped in aggressive mode (rule 8).
pub const STRIPPED_HOST_LABELS: &[&str] = &["www", "m"];

/// Directory index pages dropped from the end of the path in aggressive mode (rule 9),
/// compared case-insensitively.
pub const INDEX_PAGES: &[&str] = &[
    "index.html",
    "index.htm",
    "index.php",
    "default.asp",
    "default.aspx",
];

/// The normalized form of `url` (see the module docs), or `None` when `mode` parses URLs
/// and this one does not parse, or is not hierarchical (`mailto:`, `data:`).
pub fn normalize_url(url: &str, mode: UrlNormalize) -> Option<String> {
    let trimmed = url.trim();
    if mode == UrlNormalize::None {
        return Some(trimmed.to_owned());
    }
    // Rule 1: parsing does the case, IDNA, ports, dot segments and escaping.
    let mut parsed = Url::parse(trimmed).ok()?;
    if parsed.cannot_be_a_base() || parsed.host_str().is_none() {
        return None;
    }
    // Rule 2.
    if let Some(host) = parsed.host_str().and_then(|h| h.strip_suffix('.')) {
        if !host.is_empty() {
            let host = host.to_owned();
            parsed.set_host(Some(&host)).ok()?;
        }
    }
    // Rule 4.
    parsed.set_fragment(None);
    // Rules 3 and 5 on the path.
    let path = drop_path_sessions(&normalize_escapes(parsed.path()));
    // Rules 3 and 6 on the query.
    let query = parsed
        .query()
        .map(|q| normalize_query(&normalize_escapes(q)));
    if mode == UrlNormalize::Aggressive {
        // Rule 7. Switching between special schemes is always allowed.
        if parsed.scheme() == "https" {
            parsed.set_scheme("http").ok()?;
        }
        // Rule 8.
        if let Some(host) = parsed.host_str() {
            let mut host = host;
            while let Some((label, rest)) = host.split_once('.') {
                if STRIPPED_HOST_LABELS.contains(&label) && rest.contains('.') {
                    host = rest;
                } else {
                    break;
                }
            }
            if host != parsed.host_str().unwrap_or_default() {
                let host = host.to_owned();
                parsed.set_host(Some(&host)).ok()?;
            }
        }
    }
    let path = if mode == UrlNormalize::Aggressive {
        drop_index_page(&path)
    } else {
        path
    };
    parsed.set_path(&path);
    parsed.set_query(query.as_deref().filter(|q| !q.is_empty()));
    Some(parsed.into())
}

/// Rule 3: decodes escapes of unreserved characters and upper-cases the others.
fn normalize_escapes(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let (hi, lo) = (hex_value(bytes[i + 1]), hex_value(bytes[i + 2]));
            if let (Some(hi), Some(lo)) = (hi, lo) {
                let byte = hi << 4 | lo;
                if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
                    out.push(byte as char);
                } else {
                    out.push('%');
                    out.push(bytes[i + 1].to_ascii_uppercase() as char);
                    out.push(bytes[i + 2].to_ascii_uppercase() as char);
                }
                i += 3;
                continue;
            }
        }
        // Escaped URLs are ASCII; any other character is copied whole.
        let ch = text[i..].chars().next().expect("a character starts here");
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

fn hex_value(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// Rule 5: drops `;jsessionid=...` (any case, and the other session names of
/// [`DROPPED_PARAMS`]) from each path segment.
fn drop_path_sessions(path: &str) -> String {
    path.split('/')
        .map(|segment| {
            let mut parts = segment.split(';');
            let head = parts.next().unwrap_or_default();
            let kept: Vec<&str> = parts
                .filter(|p| !is_dropped_param(p.split('=').next().unwrap_or_default()))
                .collect();
            std::iter::once(head)
                .chain(kept)
                .collect::<Vec<_>>()
                .join(";")
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Rule 6: drops empty, tracking and session parameters and sorts the rest.
fn normalize_query(query: &str) -> String {
    let mut params: Vec<&str> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .filter(|p| {
            let name = p.split('=').next().unwrap_or_default();
            !is_dropped_param(&decode_name(name))
        })
        .collect();
    params.sort_unstable();
    params.join("&")
}

/// A parameter name with its escapes decoded (`utm%5Fsource` is `utm_source`).
fn decode_name(name: &str) -> String {
    let decoded: Vec<u8> = percent_decode(name.as_bytes());
    String::from_utf8_lossy(&decoded).into_owned()
}

fn percent_decode(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            if let (Some(hi), Some(lo)) = (
                bytes.get(i + 1).copied().and_then(hex_value),
                bytes.get(i + 2).copied().and_then(hex_value),
            ) {
                out.push(hi << 4 | lo);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

/// Rule 9: drops a last segment that is a directory index page.
fn drop_index_page(path: &str) -> String {
    match path.rsplit_once('/') {
        Some((dir, last)) if INDEX_PAGES.iter().any(|p| p.eq_ignore_ascii_case(last)) => {
            format!("{dir}/")
        }
        _ => path.to_owned(),
    }
}

/// The host of a normalized URL, and its path with the query: what mirror detection
/// compares. `None` when `url` does not parse.
pub fn host_and_path(url: &str) -> Option<(String, String)> {
    let parsed = Url::parse(url).ok()?;
    let host = parsed.host_str()?.to_owned();
    let mut path = parsed.path().to_owned();
    if let Some(q) = parsed.query() {
        path.push('?');
        path.push_str(q);
    }
    Some((host, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn std(url: &str) -> String {
        normalize_url(url, UrlNormalize::Standard).unwrap()
    }
    fn agg(url: &str) -> String {
        normalize_url(url, UrlNormalize::Aggressive).unwrap()
    }

    #[test]
    fn none_only_trims() {
        let url = "  HTTP://Example.COM:80/a/../b?utm_source=x#f \n";
        assert_eq!(
            normalize_url(url, UrlNormalize::None).unwrap(),
            "HTTP://Example.COM:80/a/../b?utm_source=x#f"
        );
        // Even a string that is no URL keeps its form.
        assert_eq!(
            normalize_url("not a url", UrlNormalize::None).unwrap(),
            "not a url"
        );
    }

    #[test]
    fn rule_1_case_idna_ports_dot_segments() {
        assert_eq!(std("HTTP://Example.COM/Path"), "http://example.com/Path");
        assert_eq!(std("http://bücher.de/"), "http://xn--bcher-kva.de/");
        assert_eq!(std("http://BÜCHER.de/"), "http://xn--bcher-kva.de/");
        assert_eq!(std("http://example.com:80/"), "http://example.com/");
        assert_eq!(std("https://example.com:443/"), "https://example.com/");
        assert_eq!(std("http://example.com:8080/"), "http://example.com:8080/");
        assert_eq!(std("https://example.com:80/"), "https://example.com:80/");
        assert_eq!(
            std("http://example.com/a/./b/../c"),
            "http://example.com/a/c"
        );
        assert_eq!(std("http://example.com/a/%2e%2E/c"), "http://example.com/c");
        assert_eq!(std("http://example.com"), "http://example.com/");
        assert_eq!(std("http://example.com/a b"), "http://example.com/a%20b");
    }

    #[test]
    fn rule_2_trailing_host_dot() {
        assert_eq!(std("http://example.com./a"), "http://example.com/a");
    }

    #[test]
    fn rule_3_percent_encoding() {
        assert_eq!(std("http://e.com/%7Euser/%41%62"), "http://e.com/~user/Ab");
        assert_eq!(std("http://e.com/a%2fb%3a"), "http://e.com/a%2Fb%3A");
        assert_eq!(
            std("http://e.com/?q=%2d%5f%2e%7e%20"),
            "http://e.com/?q=-_.~%20"
        );
        // A lone or broken escape is left alone.
        assert_eq!(std("http://e.com/100%25/%zz"), "http://e.com/100%25/%zz");
    }

    #[test]
    fn rule_4_fragment() {
        assert_eq!(std("http://e.com/a#section-2"), "http://e.com/a");
        assert_eq!(std("http://e.com/a?x=1#"), "http://e.com/a?x=1");
    }

    #[test]
    fn rule_5_path_sessions() {
        assert_eq!(
            std("http://e.com/cart;jsessionid=0A1B2C?item=3"),
            "http://e.com/cart?item=3"
        );
        assert_eq!(
            std("http://e.com/a;JSESSIONID=x/b;v=2"),
            "http://e.com/a/b;v=2"
        );
    }

    #[test]
    fn rule_6_query() {
        assert_eq!(std("http://e.com/?b=2&a=1&c"), "http://e.com/?a=1&b=2&c");
        assert_eq!(
            std("http://e.com/p?utm_source=n&UTM_Medium=e&gclid=1&fbclid=2&id=7"),
            "http://e.com/p?id=7"
        );
        assert_eq!(
            std("http://e.com/p?PHPSESSID=a&jsessionid=b&sid=c&ASPSESSIONIDQQ=d&msclkid=e"),
            "http://e.com/p"
        );
        assert_eq!(
            std("http://e.com/p?utm%5Fsource=x&a=1"),
            "http://e.com/p?a=1"
        );
        assert_eq!(std("http://e.com/p?&&a=1&&"), "http://e.com/p?a=1");
        assert_eq!(std("http://e.com/p?"), "http://e.com/p");
        // Parameters that merely look alike stay.
        assert_eq!(
            std("http://e.com/p?side=1&sids=2"),
            "http://e.com/p?side=1&sids=2"
        );
        // Repeated parameters are kept, in order of their values.
        assert_eq!(std("http://e.com/p?a=2&a=1"), "http://e.com/p?a=1&a=2");
    }

    #[test]
    fn rule_7_scheme() {
        assert_eq!(agg("https://e.com/a"), "http://e.com/a");
        assert_eq!(agg("http://e.com/a"), "http://e.com/a");
        assert_eq!(agg("https://e.com:8443/a"), "http://e.com:8443/a");
        assert_eq!(std("https://e.com/a"), "https://e.com/a");
    }

    #[test]
    fn rule_8_www_and_mobile() {
        assert_eq!(agg("http://www.espn.com/"), agg("https://espn.com"));
        assert_eq!(agg("http://m.example.com/a"), "http://example.com/a");
        assert_eq!(agg("http://www.m.example.com/a"), "http://example.com/a");
        assert_eq!(agg("http://www.com/"), "http://www.com/");
        assert_eq!(agg("http://wwwx.example.com/"), "http://wwwx.example.com/");
        assert_eq!(std("http://www.example.com/"), "http://www.example.com/");
    }

    #[test]
    fn rule_9_index_pages() {
        assert_eq!(agg("http://e.com/a/index.html"), "http://e.com/a/");
        assert_eq!(agg("http://e.com/INDEX.PHP?x=1"), "http://e.com/?x=1");
        assert_eq!(agg("http://e.com/default.asp"), "http://e.com/");
        assert_eq!(
            agg("http://e.com/myindex.html"),
            "http://e.com/myindex.html"
        );
        assert_eq!(
            std("http://e.com/a/index.html"),
            "http://e.com/a/index.html"
        );
    }

    #[test]
    fn unparseable_urls_have_no_normal_form() {
        for bad in [
            "",
            "no scheme",
            "/relative/path",
            "http://",
            "mailto:a@b.c",
            "http://a b/",
        ] {
            assert_eq!(normalize_url(bad, UrlNormalize::Standard), None, "{bad:?}");
            assert_eq!(
                normalize_url(bad, UrlNormalize::Aggressive),
                None,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn modes_parse_by_name() {
        for mode in [
            UrlNormalize::None,
            UrlNormalize::Standard,
            UrlNormalize::Aggressive,
        ] {
            assert_eq!(UrlNormalize::parse(mode.name()), Some(mode));
        }
        assert_eq!(UrlNormalize::parse("strict"), None);
    }

    #[test]
    fn host_and_path_of_a_normalized_url() {
        assert_eq!(
            host_and_path("http://e.com/a/b?x=1"),
            Some(("e.com".into(), "/a/b?x=1".into()))
        );
        assert_eq!(host_and_path("nope"), None);
    }

    proptest::proptest! {
        /// Normalizing twice is normalizing once, in every mode.
        #[test]
        fn normalization_is_idempotent(
            scheme in "(http|https|HTTP)",
            host in "(www\\.|m\\.)?[a-zA-Z]{1,5}\\.(com|de)\\.?",
            port in proptest::option::of(proptest::sample::select(vec![80u16, 443, 8080])),
            segments in proptest::collection::vec("([a-z]{0,3}|\\.|\\.\\.|%2[eE]|%7[eE]|%2f|index\\.html|a;jsessionid=1)", 0..5),
            params in proptest::collection::vec("(utm_x|a|b|sid|%41)(=[a-z%0-9]{0,3})?", 0..4),
            fragment in proptest::option::of("[a-z]{0,3}"),
        ) {
            let mut url = format!("{scheme}://{host}");
            if let Some(port) = port {
                url.push_str(&format!(":{port}"));
            }
            for s in &segments {
                url.push('/');
                url.push_str(s);
            }
            if !params.is_empty() {
                url.push('?');
                url.push_str(&params.join("&"));
            }
            if let Some(f) = fragment {
                url.push('#');
                url.push_str(&f);
            }
            for mode in [UrlNormalize::None, UrlNormalize::Standard, UrlNormalize::Aggressive] {
                let once = normalize_url(&url, mode).unwrap();
                let twice = normalize_url(&once, mode).unwrap();
                proptest::prop_assert_eq!(&once, &twice, "{} in {:?}", url, mode);
            }
        }
    }
}
