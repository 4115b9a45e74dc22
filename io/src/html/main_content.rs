//! What `--html main` drops as boilerplate, rule by rule.
//!
//! The aim is narrow: two captures of one page that differ only in menus, banners, footers
//! or advertisements should give the same text, and two pages of one site should not look
//! alike because they share a template. Losing a heading or a caption on the way costs
//! fingerprinting nothing. The rules, applied while the page is tokenized (no tree is
//! built, so a rule sees an element when it opens and the text when it ends):
//!
//! 1. **Main-content signals first** ([`is_main_signal`]): `<main>`, `<article>`, and any
//!    element with `role="main"` or `itemprop="articleBody"`. When a page has them and
//!    what they hold (by the other rules) comes to at least [`MIN_MAIN_BYTES`], that is the
//!    page's main content, whatever the elements around it are named: the Sphinx theme that
//!    wraps a page's content in `<div class="wy-nav-content">` has `role="main"` inside it.
//! 2. **Boilerplate elements** ([`BOILERPLATE_TAGS`]): `nav`, `header`, `footer`, `aside`,
//!    `menu` and everything inside them are dropped.
//! 3. **Boilerplate names**: a container element ([`CONTAINER_TAGS`]: `div`, `section`,
//!    `ul`, `table`, ... those whose end tag is required, so that a wrongly closed one cannot
//!    swallow the rest of the page) is boilerplate when one of the whitespace-separated
//!    values of its `id` or `class` names boilerplate, or its `role` is one of
//!    [`BOILERPLATE_ROLES`] (`navigation`, `banner`, `contentinfo`, `complementary`, ...).
//!    Names are matched as words, never as any substring: a value is cut into words at
//!    `-`, `_`, other punctuation and lower-to-upper case changes (`mw-navigation` is
//!    `mw navigation`, `siteFooter` is `site footer`). A word names boilerplate when it
//!    begins or ends with one of [`BOILERPLATE_WORDS`] (`nav` names `navbox`, `navigation`
//!    and `topnav`) or equals one of [`BOILERPLATE_EXACT`] (`ad`, `ads`, `toc`, ...), and
//!    content when it begins with one of [`CONTENT_WORDS`] (`content`, `main`, `article`,
//!    `body`, `post`, `entry`, ...: Readability's "maybe a candidate" words); the last word
//!    that names either decides, since the head of a compound comes last (`main-menu` and
//!    `navbox` are boilerplate, `wy-nav-content` is the Sphinx theme's content). Lines
//!    inside a boilerplate container are left out of the main text (an inline one, such as
//!    `span`, drops its text), but a main-content signal inside it still finds them
//!    (rule 1).
//! 4. **Link-dense blocks**: a block (the text between two block boundaries, see
//!    [`super::text`]) whose characters inside `<a>` are more than [`MAX_LINK_DENSITY_PCT`]
//!    percent of its characters is dropped: link lists, tag clouds, "previous / next".
//! 5. **Very short blocks**: a block of fewer than [`MIN_BLOCK_WORDS`] words is dropped:
//!    buttons, bylines, dates, "Share", one-word headings, breadcrumbs. A table row whose
//!    cells hold short blocks is one block, judged as a whole, as a row of plain cells
//!    already is (the Sphinx theme puts each cell in a `<p>`): a data table keeps its
//!    values. A row of more than [`MAX_ROW_WORDS`] words, or one holding a table, is a
//!    layout row, read block by block.
//! 6. **Site templates**: a block that the run learned is part of the page's site template
//!    ([`super::template`]) is dropped, here and in the fallback.
//! 7. **Fallback**: a page whose main content comes to fewer than [`MIN_MAIN_BYTES`] bytes
//!    gets its `text`-mode text instead, less its site template: index pages, galleries and
//!    short notices made of short or linked blocks only would otherwise be empty
//!    documents, which neardup counts but never matches.
//!
//! Everything `text` mode drops (scripts, styles, `head`, hidden elements, ...) is dropped
//! here too. The thresholds were chosen on the sample pages (`docs/inputs.md`, "HTML to
//! text"): see the constants.

use html5ever::Attribute;

/// Elements dropped with their content (rule 2).
pub const BOILERPLATE_TAGS: &[&str] = &["nav", "header", "footer", "aside", "menu"];

/// Elements that rule 3 may drop: all have a required end tag in HTML, so the extractor's
/// stack closes them where a browser would.
pub const CONTAINER_TAGS: &[&str] = &[
    "div", "section", "ul", "ol", "dl", "table", "span", "nav", "aside", "header", "footer",
    "menu", "form", "center",
];

/// Beginnings and ends of an `id` or `class` word that make it boilerplate (rule 3),
/// lower case.
pub const BOILERPLATE_WORDS: &[&str] = &[
    "nav",
    "menu",
    "footer",
    "header",
    "sidebar",
    "breadcrumb",
    "cookie",
    "banner",
    "advert",
    "sponsor",
    "social",
    "share",
    "related",
    "widget",
    "promo",
    "subscribe",
    "newsletter",
    "popup",
    "toolbar",
    "catlinks",
    "skiplink",
    "copyright",
    "pagination",
];

/// Whole `id` or `class` words that are boilerplate (rule 3): too short to be matched as a
/// beginning (`ad` begins `address`, `toc` begins `tocco`).
pub const BOILERPLATE_EXACT: &[&str] = &["ad", "ads", "adbox", "adsense", "tags", "toc"];

/// Beginnings of an `id` or `class` word that names content (rule 3): an element that has
/// one is never boilerplate by its names. Readability's list (less `and` and `shadow`,
/// which it keeps for layouts of its day), plus the blog words `post` and `entry`.
pub const CONTENT_WORDS: &[&str] = &[
    "content", "main", "article", "body", "column", "post", "entry",
];

/// ARIA landmark roles of boilerplate (rule 3).
pub const BOILERPLATE_ROLES: &[&str] = &[
    "navigation",
    "banner",
    "contentinfo",
    "complementary",
    "search",
    "menu",
    "menubar",
];

/// Rule 4: a block with more than this percentage of its characters inside links is
/// dropped. 50% is jusText's and Resiliparse's order of magnitude; on the samples, a
/// Wikipedia paragraph has 5 to 25% of its characters in links, a menu or a list of related
/// pages 80 to 100%.
pub const MAX_LINK_DENSITY_PCT: usize = 50;

/// Rule 5: a block with fewer words than this is dropped. Measured on the samples
/// (docs/inputs.md): 5 words keeps every sentence and drops the menus, bylines and headings
/// that differ between captures.
pub const MIN_BLOCK_WORDS: usize = 5;

/// Rule 5: a table row of at most this many words whose cells hold short blocks is one
/// block. A row of a data table (a feature matrix, a list of a class's methods) is a few
/// to a few dozen words; a layout table's row holds a page.
pub const MAX_ROW_WORDS: usize = 64;

/// Rules 1 and 7: below this many bytes of main content, a page keeps its short and linked
/// blocks too (less its boilerplate and template), or its `text`-mode text. On the samples
/// `main` left 27 of the 275 HTML pages empty and 45 under 200 bytes, against 11 and 22 for
/// `text` (frameset pages, redirects, an unclosed `<title>` that swallows the page in a
/// browser too): 200 bytes (about 30 words) gave those pages their text back. 400 (about 60
/// words) since the site benchmark (docs/inputs.md): reference pages of 216 to 349 bytes
/// (a javadoc interface, a man page of `close()`) kept only the sentences their siblings
/// share, and their names and signatures, short blocks, tell them apart; the captures of
/// the samples came no further apart (mean distance 0.6 bits against 0.7).
pub const MIN_MAIN_BYTES: usize = 400;

/// Whether a block of `words` words and `bytes` bytes of text, `link_bytes` of them inside
/// `<a>`, is kept (rules 4 and 5).
pub fn keep_block(words: usize, bytes: usize, link_bytes: usize) -> bool {
    words >= MIN_BLOCK_WORDS && link_bytes * 100 <= bytes * MAX_LINK_DENSITY_PCT
}

/// Whether an element named `tag` is boilerplate by its name alone (rule 2): it and
/// everything inside it are dropped.
pub fn is_boilerplate_tag(tag: &str) -> bool {
    BOILERPLATE_TAGS.contains(&tag)
}

/// Whether an element named `tag` with these attributes is boilerplate by its tag or its
/// names (rules 2 and 3).
pub fn is_boilerplate(tag: &str, attrs: &[Attribute]) -> bool {
    is_boilerplate_tag(tag) || is_boilerplate_by_names(tag, attrs)
}

/// Whether a container element is boilerplate by its `id`, `class` or `role` (rule 3).
pub fn is_boilerplate_by_names(tag: &str, attrs: &[Attribute]) -> bool {
    if !CONTAINER_TAGS.contains(&tag) {
        return false;
    }
    let mut boilerplate = false;
    for attr in attrs {
        let value: &str = &attr.value;
        match &*attr.name.local {
            "id" | "class" => {
                boilerplate |= value.split_ascii_whitespace().any(boilerplate_name);
            }
            "role" => {
                boilerplate |= BOILERPLATE_ROLES
                    .iter()
                    .any(|role| value.trim().eq_ignore_ascii_case(role))
            }
            _ => {}
        }
    }
    boilerplate
}

/// Whether an element is a main-content signal (rule 1): `<main>`, `<article>`,
/// `role="main"` or `itemprop="articleBody"`.
pub fn is_main_signal(tag: &str, attrs: &[Attribute]) -> bool {
    matches!(tag, "main" | "article")
        || attrs.iter().any(|attr| {
            let value = attr.value.trim();
            match &*attr.name.local {
                "role" => value.eq_ignore_ascii_case("main"),
                "itemprop" => value
                    .split_ascii_whitespace()
                    .any(|v| v.eq_ignore_ascii_case("articleBody")),
                _ => false,
            }
        })
}

/// The words of an `id` or `class` value (ASCII letters and digits only, case kept): cut
/// at whitespace, at anything but ASCII letters and digits, and where a lower-case letter
/// is followed by an upper-case one.
fn name_words(value: &str) -> impl Iterator<Item = &[u8]> + '_ {
    let bytes = value.as_bytes();
    let mut start = 0;
    let mut at = 0;
    std::iter::from_fn(move || {
        while at <= bytes.len() {
            let here = at;
            at += 1;
            let alnum = here < bytes.len() && bytes[here].is_ascii_alphanumeric();
            let case_change = alnum
                && here > start
                && bytes[here].is_ascii_uppercase()
                && bytes[here - 1].is_ascii_lowercase();
            if alnum && !case_change {
                continue;
            }
            let word = &bytes[start..here];
            start = if alnum { here } else { here + 1 };
            if !word.is_empty() {
                return Some(word);
            }
        }
        None
    })
}

/// Whether one `id` or `class` value names boilerplate: its last word that names either
/// boilerplate or content names boilerplate (the head of a compound comes last:
/// `main-menu` is a menu, `wy-nav-content` and `sidebar-content` are content).
fn boilerplate_name(name: &str) -> bool {
    let mut boilerplate = false;
    for word in name_words(name) {
        if CONTENT_WORDS.iter().any(|w| begins(word, w)) {
            boilerplate = false;
        } else if boilerplate_word(word) {
            boilerplate = true;
        }
    }
    boilerplate
}

/// Whether `word` begins with `needle` (lower case), ASCII case ignored.
fn begins(word: &[u8], needle: &str) -> bool {
    word.len() >= needle.len() && word[..needle.len()].eq_ignore_ascii_case(needle.as_bytes())
}

/// Whether `word` ends with `needle` (lower case), ASCII case ignored.
fn ends(word: &[u8], needle: &str) -> bool {
    word.len() >= needle.len()
        && word[word.len() - needle.len()..].eq_ignore_ascii_case(needle.as_bytes())
}

/// Whether one word of an `id` or `class` names boilerplate.
fn boilerplate_word(word: &[u8]) -> bool {
    BOILERPLATE_EXACT
        .iter()
        .any(|exact| word.eq_ignore_ascii_case(exact.as_bytes()))
        || BOILERPLATE_WORDS
            .iter()
            .any(|needle| begins(word, needle) || ends(word, needle))
}

#[cfg(test)]
mod tests {
    use super::*;
    use html5ever::{ns, LocalName, QualName};

    fn attr(name: &str, value: &str) -> Attribute {
        Attribute {
            name: QualName::new(None, ns!(), LocalName::from(name)),
            value: value.into(),
        }
    }

    #[test]
    fn boilerplate_by_tag_name_and_role() {
        assert!(is_boilerplate("nav", &[]));
        assert!(is_boilerplate("footer", &[attr("class", "article")]));
        assert!(!is_boilerplate("div", &[]));
        assert!(is_boilerplate("div", &[attr("role", " Navigation ")]));
        assert!(!is_boilerplate("div", &[attr("role", "main")]));
    }

    #[test]
    fn boilerplate_by_class_and_id_words() {
        assert!(is_boilerplate("div", &[attr("id", "mw-navigation")]));
        assert!(is_boilerplate(
            "table",
            &[attr("class", "navbox collapsible")]
        ));
        assert!(is_boilerplate("ul", &[attr("class", "x Menu-Top")]));
        assert!(is_boilerplate("div", &[attr("class", "ad")]));
        // Short words count only whole: "head" and "shadow" hold "ad".
        assert!(!is_boilerplate("div", &[attr("class", "head shadow load")]));
        // Words, not substrings: "canvas" and "unshared" hold "nav" and "share".
        assert!(!is_boilerplate("div", &[attr("class", "canvas unshared")]));
        assert!(is_boilerplate("div", &[attr("id", "topnav")]));
        assert!(is_boilerplate("div", &[attr("class", "siteFooter")]));
        // A word that names content wins: the Sphinx theme's wrapper of the page.
        assert!(!is_boilerplate("div", &[attr("class", "wy-nav-content")]));
        assert!(!is_boilerplate(
            "section",
            &[
                attr("class", "wy-nav-content-wrap"),
                attr("data-toggle", "wy-nav-shift")
            ]
        ));
        assert!(is_boilerplate("div", &[attr("id", "main-menu")]));
        assert!(!is_boilerplate("div", &[attr("class", "sidebar-content")]));
        assert!(is_boilerplate("ul", &[attr("class", "menu main")]));
        // Only containers whose end tag is required: a <p class=footer> or <li class=nav>
        // left open must not swallow the page.
        assert!(!is_boilerplate("p", &[attr("class", "footer")]));
        assert!(!is_boilerplate("li", &[attr("class", "nav")]));
        // Other attributes do not count.
        assert!(!is_boilerplate("div", &[attr("title", "menu")]));
    }

    #[test]
    fn words_of_names() {
        let words: Vec<&[u8]> = name_words("wy-nav_content  siteFooter x2 --A").collect();
        let expected: [&[u8]; 7] = [b"wy", b"nav", b"content", b"site", b"Footer", b"x2", b"A"];
        assert_eq!(words, expected);
        assert_eq!(name_words("").count(), 0);
        let expected: [&[u8]; 2] = [b"t", b"Nav"];
        assert_eq!(name_words("ÉtéNav").collect::<Vec<_>>(), expected);
    }

    #[test]
    fn main_signals() {
        assert!(is_main_signal("main", &[]));
        assert!(is_main_signal("article", &[]));
        assert!(is_main_signal("div", &[attr("role", " Main")]));
        assert!(is_main_signal(
            "div",
            &[attr("itemprop", "text articleBody")]
        ));
        assert!(!is_main_signal("div", &[attr("class", "main")]));
        assert!(!is_main_signal("section", &[attr("role", "navigation")]));
    }

    #[test]
    fn blocks_are_kept_by_length_and_link_density() {
        assert!(keep_block(5, 30, 15));
        assert!(!keep_block(5, 30, 16));
        assert!(!keep_block(MIN_BLOCK_WORDS - 1, 30, 0));
    }
}
