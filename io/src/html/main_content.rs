//! What `--html main` drops as boilerplate, rule by rule.
//!
//! The aim is narrow: two captures of one page that differ only in menus, banners, footers
//! or advertisements should give the same text, and two pages of one site should not look
//! alike because they share a template. Losing a heading or a caption on the way costs
//! fingerprinting nothing. The rules, applied while the page is tokenized (no tree is
//! built, so a rule sees an element when it opens and the text when it ends):
//!
//! 1. **Boilerplate elements** ([`BOILERPLATE_TAGS`]): `nav`, `header`, `footer`, `aside`,
//!    `menu` and everything inside them are dropped.
//! 2. **Boilerplate names**: a container element ([`CONTAINER_TAGS`]: `div`, `section`,
//!    `ul`, `table`, ... those whose end tag is required, so that a wrongly closed one cannot
//!    swallow the rest of the page) is dropped with its content when one of the
//!    whitespace-separated words of its `id` or `class` contains one of
//!    [`BOILERPLATE_WORDS`] (`nav`, `menu`, `footer`, `sidebar`, `cookie`, ...; ASCII case
//!    ignored), equals one of [`BOILERPLATE_EXACT`] (`ad`, `ads`, ...), or its `role` is one
//!    of [`BOILERPLATE_ROLES`] (`navigation`, `banner`, `contentinfo`, `complementary`,
//!    ...). Wikipedia's `navbox`, `mw-navigation`, `catlinks` and `footer`, WordPress's
//!    `menu-*`, `widget` and `sidebar` and the usual cookie banners all fall under it.
//! 3. **Link-dense blocks**: a block (the text between two block boundaries, see
//!    [`super::text`]) whose characters inside `<a>` are more than [`MAX_LINK_DENSITY_PCT`]
//!    percent of its characters is dropped: link lists, tag clouds, "previous / next".
//! 4. **Very short blocks**: a block of fewer than [`MIN_BLOCK_WORDS`] words is dropped:
//!    buttons, bylines, dates, "Share", one-word headings, breadcrumbs.
//! 5. **Fallback**: a page whose main content comes to fewer than [`MIN_MAIN_BYTES`] bytes
//!    gets its `text`-mode text instead: index pages, galleries and short notices made of
//!    short or linked blocks only would otherwise be empty documents, which neardup counts
//!    but never matches.
//!
//! Everything `text` mode drops (scripts, styles, `head`, hidden elements, ...) is dropped
//! here too. The thresholds were chosen on the sample pages (`docs/inputs.md`, "HTML to
//! text"): see the constants.

use html5ever::Attribute;

/// Elements dropped with their content (rule 1).
pub const BOILERPLATE_TAGS: &[&str] = &["nav", "header", "footer", "aside", "menu"];

/// Elements that rule 2 may drop: all have a required end tag in HTML, so the extractor's
/// stack closes them where a browser would.
pub const CONTAINER_TAGS: &[&str] = &[
    "div", "section", "ul", "ol", "dl", "table", "span", "nav", "aside", "header", "footer",
    "menu", "form", "center",
];

/// Substrings that make an `id` or `class` word boilerplate (rule 2), lower case.
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

/// Whole `id` or `class` words that are boilerplate (rule 2): too short to be searched for
/// as substrings (`ad` is in `head`, `load`, `shadow`).
pub const BOILERPLATE_EXACT: &[&str] = &["ad", "ads", "adbox", "adsense", "tags", "toc"];

/// ARIA landmark roles of boilerplate (rule 2).
pub const BOILERPLATE_ROLES: &[&str] = &[
    "navigation",
    "banner",
    "contentinfo",
    "complementary",
    "search",
    "menu",
    "menubar",
];

/// Rule 3: a block with more than this percentage of its characters inside links is
/// dropped. 50% is jusText's and Resiliparse's order of magnitude; on the samples, a
/// Wikipedia paragraph has 5 to 25% of its characters in links, a menu or a list of related
/// pages 80 to 100%.
pub const MAX_LINK_DENSITY_PCT: usize = 50;

/// Rule 4: a block with fewer words than this is dropped. Measured on the samples
/// (docs/inputs.md): 5 words keeps every sentence and drops the menus, bylines and headings
/// that differ between captures.
pub const MIN_BLOCK_WORDS: usize = 5;

/// Rule 5: below this many bytes of main content, a page keeps its `text`-mode text. On
/// the samples `main` left 27 of the 275 HTML pages empty and 45 under 200 bytes, against 11
/// and 22 for `text` (frameset pages, redirects, an unclosed `<title>` that swallows the
/// page in a browser too): 200 bytes (about 30 words) gives those pages their text back.
pub const MIN_MAIN_BYTES: usize = 200;

/// Whether a block of `words` words and `bytes` bytes of text, `link_bytes` of them inside
/// `<a>`, is kept (rules 3 and 4).
pub fn keep_block(words: usize, bytes: usize, link_bytes: usize) -> bool {
    words >= MIN_BLOCK_WORDS && link_bytes * 100 <= bytes * MAX_LINK_DENSITY_PCT
}

/// Whether an element named `tag` with these attributes is boilerplate (rules 1 and 2).
pub fn is_boilerplate(tag: &str, attrs: &[Attribute]) -> bool {
    if BOILERPLATE_TAGS.contains(&tag) {
        return true;
    }
    if !CONTAINER_TAGS.contains(&tag) {
        return false;
    }
    attrs.iter().any(|attr| {
        let value: &str = &attr.value;
        match &*attr.name.local {
            "id" | "class" => value.split_ascii_whitespace().any(boilerplate_word),
            "role" => BOILERPLATE_ROLES
                .iter()
                .any(|role| value.trim().eq_ignore_ascii_case(role)),
            _ => false,
        }
    })
}

/// Whether one `id` or `class` word is boilerplate.
fn boilerplate_word(word: &str) -> bool {
    // Lower-cased once into a buffer on the stack (words longer than it are cut: the
    // needles are searched for in the first 64 bytes only).
    let mut buffer = [0u8; 64];
    let bytes = &word.as_bytes()[..word.len().min(buffer.len())];
    let lower = &mut buffer[..bytes.len()];
    lower.copy_from_slice(bytes);
    lower.make_ascii_lowercase();
    let lower: &[u8] = lower;
    BOILERPLATE_EXACT
        .iter()
        .any(|exact| lower == exact.as_bytes())
        || BOILERPLATE_WORDS.iter().any(|needle| {
            let needle = needle.as_bytes();
            lower.len() >= needle.len() && lower.windows(needle.len()).any(|w| w == needle)
        })
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
        // Only containers whose end tag is required: a <p class=footer> or <li class=nav>
        // left open must not swallow the page.
        assert!(!is_boilerplate("p", &[attr("class", "footer")]));
        assert!(!is_boilerplate("li", &[attr("class", "nav")]));
        // Other attributes do not count.
        assert!(!is_boilerplate("div", &[attr("title", "menu")]));
    }

    #[test]
    fn blocks_are_kept_by_length_and_link_density() {
        assert!(keep_block(5, 30, 15));
        assert!(!keep_block(5, 30, 16));
        assert!(!keep_block(MIN_BLOCK_WORDS - 1, 30, 0));
    }
}
