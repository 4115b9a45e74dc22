//! Golden cases for HTML to text, one rule at a time, and the sample pages.

use super::*;

fn text(html: &str) -> String {
    let mut out = Extracted::default();
    extract(html, HtmlMode::Text, &mut out);
    out.text
}

fn main_text(html: &str) -> String {
    let mut out = Extracted::default();
    extract(html, HtmlMode::Main, &mut out);
    out.text
}

/// `main` mode's rules 1 to 6 without the fallback to `text` (rule 7).
fn main_rules(html: &str) -> String {
    let mut out = Extracted::default();
    text::extract_text(html, text::Rules::Main, HostTemplate::NONE, &mut out);
    out.text
}

fn title(html: &str) -> Option<String> {
    let mut out = Extracted::default();
    extract(html, HtmlMode::Text, &mut out);
    out.title
}

#[test]
fn modes_have_names() {
    for mode in HtmlMode::ALL {
        assert_eq!(HtmlMode::parse(mode.name()), Some(mode));
        assert_eq!(
            serde_json::to_string(&mode).unwrap(),
            format!("\"{}\"", mode.name())
        );
    }
    assert_eq!(HtmlMode::parse("Main"), None);
    assert_eq!(HtmlMode::parse("readability"), None);
}

#[test]
fn entities_are_decoded() {
    assert_eq!(
        text("<p>Fish &amp; chips &lt;3 &eacute;t&eacute; &#233;&#xE9; &euro;5 &nbsp;x &copy &bogus;</p>"),
        "Fish & chips <3 été éé €5 x © &bogus;"
    );
    // In a title too, and an ampersand that starts no entity stays.
    assert_eq!(
        title("<title>A &amp; B & C</title>").as_deref(),
        Some("A & B & C")
    );
}

#[test]
fn scripts_styles_and_invisible_elements_are_skipped() {
    let html = "<html><head><style>p { color: red }</style><script>var a = '<p>no</p>';</script>\
        <meta name=x content=y><link rel=stylesheet href=a.css></head>\
        <body><script type=\"text/javascript\">document.write(\"</div>hidden\")</script>\
        <p>visible</p><noscript><p>enable scripts</p></noscript><template><p>t</p></template>\
        <svg><text>label</text><title>svg title</title></svg><math><mi>x</mi></math>\
        <select><option>choice</option></select><textarea>typed</textarea>\
        <button>Click</button><iframe src=x>fallback</iframe><div hidden>secret</div>\
        <p style=\"color: red; DISPLAY : None\">also secret</p><p style=\"display:block\">shown</p>\
        </body></html>";
    assert_eq!(text(html), "visible\nshown");
}

#[test]
fn a_self_closed_script_still_hides_until_its_end_tag() {
    // As in a browser: `/>` does not close a script in HTML.
    assert_eq!(
        text("<p>a</p><script src=x /><p>b</p></script><p>c</p>"),
        "a\nc"
    );
}

#[test]
fn block_elements_end_lines() {
    let html = "<body>one<div>two<p>three</p>four</div><ul><li>five<li>six</ul>seven<br>eight\
        <h1>nine</h1><table><tr><td>ten</td><td>eleven</td></tr><tr><th>twelve</th></tr></table>\
        thir<b>teen</b> four<span>teen</span><hr/>fifteen</body>";
    assert_eq!(
        text(html),
        "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten eleven\ntwelve\nthirteen fourteen\nfifteen"
    );
}

#[test]
fn block_tags_are_the_listed_ones() {
    for name in text::BLOCK_TAGS {
        assert!(text::kind_is_block(name), "{name}");
    }
    for name in ["span", "a", "b", "td", "img", "br", "x-custom"] {
        assert!(!text::kind_is_block(name), "{name}");
    }
}

#[test]
fn whitespace_is_collapsed_within_lines() {
    assert_eq!(
        text("<p>  a \n\t b\u{a0}\u{a0}c  </p>\n\n<p>\n</p><pre>  x\n   y  </pre>d<img alt=z>e"),
        "a b c\nx y\nd e"
    );
}

#[test]
fn the_title_is_captured_not_written() {
    let html = "<html><head><title>\n  The   Title </title></head><body><p>Body</p>\
        <title>second</title></body></html>";
    let mut out = Extracted::default();
    extract(html, HtmlMode::Text, &mut out);
    assert_eq!(out.title.as_deref(), Some("The Title"));
    assert_eq!(out.text, "Body");
    // No title, or an empty one: None.
    assert_eq!(title("<p>x</p>"), None);
    assert_eq!(title("<title> </title><p>x</p>"), None);
    // A title inside svg is not the document's.
    assert_eq!(
        title("<svg><title>icon</title></svg><title>Page</title>").as_deref(),
        Some("Page")
    );
}

#[test]
fn head_ends_where_a_browser_ends_it() {
    // No </head>: the first body element ends it.
    assert_eq!(text("<head><title>t</title><p>text</p>"), "text");
    assert_eq!(
        text("<html><head><meta charset=utf-8>Hello<p>x"),
        "Hello\nx"
    );
    // An explicit body after a head without its end tag.
    assert_eq!(text("<head><style>s</style><body>b"), "b");
}

#[test]
fn comments_cdata_and_doctypes_are_dropped() {
    assert_eq!(
        text("<!DOCTYPE html><p>a<!-- comment <p>no</p> -->b<![CDATA[ cdata ]]>c<?php x ?>d</p>"),
        "abcd"
    );
    // An unterminated comment runs to the end.
    assert_eq!(text("<p>kept</p><!-- <p>lost</p>"), "kept");
}

#[test]
fn unclosed_and_stray_tags() {
    assert_eq!(text("<p>a<p>b<div>c</span></li></table>d"), "a\nb\nc\nd");
    // A stray end tag does not close the hidden element around it.
    assert_eq!(text("<p>x<template></div></p>gone</template>y"), "x\ny");
    // Elements left open are closed by their parent's end tag.
    assert_eq!(text("<div>a <span><b>o</div>b"), "a o\nb");
    assert_eq!(
        text("<div>a<select><option>o</option></select></div>b"),
        "a\nb"
    );
    // A broken tag at the end of the input.
    assert_eq!(text("<p>a</p><div class=\"x"), "a");
    assert_eq!(text(""), "");
    assert_eq!(text("plain words"), "plain words");
}

#[test]
fn plaintext_makes_the_rest_text() {
    assert_eq!(text("<p>a</p><plaintext><p>b</p>"), "a\n<p>b</p>");
}

/// The nesting must cost no stack: run in a thread with the default 2 MiB stack.
#[test]
fn nesting_100k_deep_does_not_overflow() {
    const DEPTH: usize = 100_000;
    let handle = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(|| {
            let mut html = String::with_capacity(DEPTH * 40);
            for i in 0..DEPTH {
                html.push_str(if i % 2 == 0 {
                    "<div>"
                } else {
                    "<span><a href=x>"
                });
            }
            html.push_str("deep text");
            for i in (0..DEPTH).rev() {
                html.push_str(if i % 2 == 0 { "</div>" } else { "</a></span>" });
            }
            html.push_str("<p>after</p>");
            // Never closed at all, too.
            let unclosed = "<div><b>".repeat(DEPTH) + "bottom";
            (
                text(&html),
                text(&unclosed),
                main_rules(&html),
                main_text(&html),
            )
        })
        .unwrap();
    let (closed, unclosed, main, fallback) = handle.join().expect("no stack overflow");
    assert_eq!(closed, "deep text\nafter");
    assert_eq!(unclosed, "bottom");
    // All of it is in links or too short for `main`, which falls back to the text.
    assert_eq!(main, "");
    assert_eq!(fallback, closed);
}

/// Stray end tags are searched for among a bounded number of open elements: a page of
/// them is linear, not quadratic.
#[test]
fn stray_end_tags_are_linear() {
    let html = "<div>".repeat(50_000) + &"</x>".repeat(200_000) + "end";
    let started = std::time::Instant::now();
    assert_eq!(text(&html), "end");
    // 200,000 end tags against 50,000 open elements, quadratic, would be 10^10 steps.
    assert!(started.elapsed().as_secs() < 20, "{:?}", started.elapsed());
    // An end tag beyond the search window is ignored, the rest of the page stays.
    let deep = format!(
        "<template>{}</template>after",
        "<div>".repeat(text::MAX_END_TAG_SEARCH + 10)
    );
    assert_eq!(text(&deep), "");
}

/// The process's peak resident memory so far, in bytes (Linux).
#[cfg(target_os = "linux")]
fn peak_rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kb: usize = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

/// A 50 MB page is read in bounded extra memory: its text and the tokenizer's buffers, not
/// copies of the page (the input is fed 1 MiB at a time).
#[cfg(target_os = "linux")]
#[test]
fn a_50_mb_page_costs_a_bounded_amount_of_memory() {
    const SIZE: usize = 50_000_000;
    let block = "<div class=x><p>Some words &amp; more words in a paragraph.</p>\
                 <script>var s = '<p>not text</p>';</script></div>\n";
    let copies = SIZE / block.len();
    let page = block.repeat(copies);
    let before = peak_rss();
    let mut out = Extracted::default();
    extract(&page, HtmlMode::Main, &mut out);
    let grown = peak_rss().saturating_sub(before);
    let line = "Some words & more words in a paragraph.\n";
    assert_eq!(out.text.len(), line.len() * copies - 1);
    assert!(out.text.starts_with(line));
    // The text is a third of the page; allow the text, its growth and the tokenizer's
    // buffers, and the other tests running at the same time: at most twice the page.
    assert!(
        grown <= 2 * SIZE,
        "peak memory grew by {grown} bytes for a {SIZE}-byte page"
    );
}

#[test]
fn buffers_are_reused_and_reset() {
    let mut out = Extracted::default();
    extract(
        "<title>One</title><p>first page</p>",
        HtmlMode::Text,
        &mut out,
    );
    let capacity = out.text.capacity();
    extract("<p>second</p>", HtmlMode::Text, &mut out);
    assert_eq!((out.text.as_str(), out.title.as_deref()), ("second", None));
    assert!(out.text.capacity() >= capacity.min(6));
    extract("<p>raw &amp;</p>", HtmlMode::None, &mut out);
    assert_eq!(out.text, "<p>raw &amp;</p>");
}

#[test]
fn main_drops_boilerplate_rule_by_rule() {
    let article = "<p>This paragraph is the real article text of the page.</p>";
    // Rule 1: boilerplate elements.
    let html = format!(
        "<header><p>Site name and a long tagline of many words</p></header><nav><p>Home about \
         contact and other sections here</p></nav>{article}<aside><p>Related stories you might \
         like to read</p></aside><footer><p>Copyright 2024 the company, all rights reserved</p></footer>"
    );
    assert_eq!(
        main_rules(&html),
        "This paragraph is the real article text of the page."
    );
    assert!(text(&html).contains("Copyright 2024"));
    // Rule 7: a page whose main content is too short keeps what is outside its
    // boilerplate, short blocks included; with nothing there, its visible text.
    assert_eq!(
        main_text("<nav><p>Home</p></nav><p>Only a short note.</p>"),
        "Only a short note."
    );
    assert_eq!(main_text("<nav><p>Home</p></nav>"), "Home");
    // Rule 2: boilerplate names on containers.
    let html = format!(
        "<div id=\"cookie-banner\">We use cookies to improve your experience on the site</div>\
         <ul class=\"menu main\"><li>Home page of this site with words</ul>{article}\
         <div role=navigation>Some navigation text with enough words</div>\
         <p class=footer>A footer paragraph which is kept because p is not a container</p>"
    );
    assert_eq!(
        main_rules(&html),
        "This paragraph is the real article text of the page.\n\
         A footer paragraph which is kept because p is not a container"
    );
    // Rule 3: link-dense blocks.
    let html = format!(
        "<p><a href=1>First link</a> | <a href=2>Second link</a> | <a href=3>Third one</a></p>\
         {article}<p>A sentence with <a href=x>one link</a> among many other plain words.</p>"
    );
    assert_eq!(
        main_rules(&html),
        "This paragraph is the real article text of the page.\n\
         A sentence with one link among many other plain words."
    );
    // An unclosed link ends at the next link, not at the end of the page.
    assert_eq!(
        main_rules(
            "<p><a href=a>Menu<p><a href=b>Next</a> and then a long sentence of plain words.</p>"
        ),
        "Next and then a long sentence of plain words."
    );
    // Rule 4: short blocks.
    let html = format!("<h2>Share</h2><p>Posted by admin</p>{article}<div>Read more</div>");
    assert_eq!(
        main_rules(&html),
        "This paragraph is the real article text of the page."
    );
}

#[test]
fn documents_decode_then_extract() {
    let page = "<html><head><meta charset=\"windows-1251\"><title>T</title></head><body>\
        <p>Привет, мир</p></body></html>";
    let (bytes, _, _) = encoding_rs::WINDOWS_1251.encode(page);
    let doc = html_document(&bytes, Some("text/html"), HtmlMode::Text);
    assert_eq!(
        (
            doc.text.as_str(),
            doc.title.as_deref(),
            doc.charset,
            doc.replacements
        ),
        ("Привет, мир", Some("T"), "windows-1251", 0)
    );
    // Plain text is decoded only.
    let doc = html_document(
        b"<p>not html</p>",
        Some("text/plain; charset=utf-8"),
        HtmlMode::Text,
    );
    assert_eq!((doc.text.as_str(), doc.title), ("<p>not html</p>", None));
    // Without a Content-Type, the bytes decide.
    let doc = html_document(b"  <!DOCTYPE html><p>a &amp; b", None, HtmlMode::Text);
    assert_eq!(doc.text, "a & b");
    let doc = html_document(b"a <b>bold</b> claim", None, HtmlMode::Text);
    assert_eq!(doc.text, "a <b>bold</b> claim");
    // `none` keeps the markup, decoded.
    let doc = html_document(
        b"<p>caf\xe9</p>",
        Some("text/html; charset=latin1"),
        HtmlMode::None,
    );
    assert_eq!(doc.text, "<p>café</p>");
}

#[test]
fn content_type_values() {
    assert_eq!(media_type(" Text/HTML ; charset=UTF-8"), "Text/HTML");
    assert_eq!(media_type("text/plain"), "text/plain");
    assert_eq!(media_type(""), "");
    assert!(is_html_type("TEXT/html"));
    assert!(is_html_type("application/xhtml+xml"));
    assert!(!is_html_type("text/plain"));
    assert!(is_text_type("text/PLAIN"));
    assert!(!is_text_type("application/pdf"));
    assert_eq!(
        charset_param("text/html; Charset=\"Shift_JIS\""),
        Some("Shift_JIS")
    );
    assert_eq!(
        charset_param("text/html;foo=bar; charset = utf-8 "),
        Some("utf-8")
    );
    assert_eq!(charset_param("text/html; charset="), None);
    assert_eq!(charset_param("text/html"), None);
}

#[test]
fn binary_payloads_are_recognised() {
    assert!(!looks_binary(b""));
    assert!(!looks_binary(
        "<html>ünïcode\r\n\ttext\x0c\x1b$B</html>".as_bytes()
    ));
    assert!(looks_binary(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\x00"));
    assert!(looks_binary(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"));
    // A few control bytes in a long text are tolerated, many are not.
    let mut text = vec![b'a'; 1000];
    text[10] = 0x01;
    assert!(!looks_binary(&text));
    for b in text.iter_mut().step_by(50) {
        *b = 0x02;
    }
    assert!(looks_binary(&text));
    // UTF-16 with its byte order mark has NULs and is text.
    let utf16: Vec<u8> = b"\xff\xfe"
        .iter()
        .copied()
        .chain(b"h\x00i\x00".iter().copied())
        .collect();
    assert!(!looks_binary(&utf16));
    // Only the head is looked at.
    let mut late = vec![b'a'; SNIFF_BYTES];
    late.push(0);
    assert!(!looks_binary(&late));
    // A page labelled HTML may hold stray control bytes (here 1.8% of a 560-byte page, as
    // a spam page of a crawl did); plain text may not; a NUL is binary in both.
    let mut page = b"<html><body><p>".to_vec();
    page.resize(560, b'x');
    for at in (100..560).step_by(46) {
        page[at] = 0x07;
    }
    assert_eq!(page.iter().filter(|&&b| b == 0x07).count(), 10);
    assert!(!looks_binary_labelled(&page, true));
    assert!(looks_binary_labelled(&page, false));
    let pdf = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\x00";
    assert!(looks_binary_labelled(pdf, true));
    // Past 10%, a payload labelled HTML is binary too.
    let mut noisy = vec![b'a'; 100];
    noisy[..11].fill(0x02);
    assert!(looks_binary_labelled(&noisy, true));
    noisy[..11].fill(b'a');
    noisy[..10].fill(0x02);
    assert!(!looks_binary_labelled(&noisy, true));
}

mod measure;
pub mod samples;

/// Issue 38: the Read the Docs theme wraps the page in containers named `wy-nav-content`,
/// beside a `<nav>` sidebar; its `role="main"` finds the article, and the names match as
/// words (`wy-nav-content` names content).
#[test]
fn main_content_signals_come_first() {
    let sidebar = "<nav class=\"wy-nav-side\"><div class=\"menu\"><p>Every chapter of the manual listed in the sidebar of the theme</p></div></nav>";
    let article =
        "<p>This paragraph is the real article text of the page, long enough to count.</p>";
    let page = format!(
        "{sidebar}<section class=\"wy-nav-content-wrap\"><div class=\"wy-nav-content\">\
         <div class=\"crumbs-navigation\"><p>Docs home and the path to this page here</p></div>\
         <div role=\"main\">{}</div><footer><p>Copyright the kernel developers and all others</p></footer></div></section>",
        article.repeat(6)
    );
    let text = main_text(&page);
    assert_eq!(text.lines().count(), 6);
    assert!(text
        .lines()
        .all(|l| l.starts_with("This paragraph is the real article")));
    // A signal inside a container named as boilerplate is still found; a boilerplate
    // container inside the signal is still left out.
    let page = format!(
        "<div class=\"sidebar\"><p>Links to the other parts of this site and more</p><article>{}\
         <div class=\"share-buttons\"><p>Share this page with your friends and family now</p></div></article></div>",
        article.repeat(6)
    );
    let text = main_text(&page);
    assert_eq!(text.lines().count(), 6, "{text}");
    // Too little inside the signals: the page's other rules decide.
    let page = format!(
        "<main><p>A short main part.</p></main>{}",
        article.repeat(6)
    );
    assert_eq!(main_text(&page).lines().count(), 6);
}

/// A line of the page's site template is dropped in `main` mode, in its fallback and in
/// `text` mode; other hosts' pages keep it.
#[test]
fn site_template_lines_are_dropped() {
    use super::template::{block_hash, host_key, SiteTemplates};
    let menu = "Home Download Documentation Community and all the other sections";
    let own = "This paragraph is the page's own text, long enough to be kept by the rules.";
    let page =
        format!("<div><p>{menu}</p></div><p>{own}</p><p>{own} Again.</p><p>{own} Third.</p>");
    let templates = SiteTemplates::from_pairs(vec![(host_key("a.example"), block_hash(menu))]);
    let template = templates.of_url(Some("http://a.example/x"));
    let mut out = Extracted::default();
    extract_with(&page, HtmlMode::Main, template, &mut out);
    assert!(
        !out.text.contains(menu) && out.text.contains(own),
        "{}",
        out.text
    );
    extract_with(&page, HtmlMode::Text, template, &mut out);
    assert!(!out.text.contains(menu) && out.text.contains(own));
    // The fallback: a short page keeps what it has, never the template.
    extract_with(
        &format!("<p>{menu}</p><p>Short.</p>"),
        HtmlMode::Main,
        template,
        &mut out,
    );
    assert_eq!(out.text, "Short.");
    let other = templates.of_url(Some("http://b.example/x"));
    extract_with(&page, HtmlMode::Main, other, &mut out);
    assert!(out.text.contains(menu));
}

/// Rule 5 of `main` mode: a table row whose cells hold short blocks is one block, judged as
/// a whole, as a row of plain cells is; a layout row (long, or holding a table) is read
/// block by block.
#[test]
fn a_row_of_short_cells_is_one_block() {
    let row = |cells: &[&str]| {
        let cells: String = cells
            .iter()
            .map(|c| format!("<td><p>{c}</p></td>"))
            .collect();
        format!("<tr>{cells}</tr>")
    };
    // A feature matrix: each cell a paragraph, the status alone a word.
    let html = format!(
        "<table><thead>{}</thead><tbody>{}{}</tbody></table>",
        row(&["Subsystem", "Feature", "Status", "Description", "Notes"]),
        row(&[
            "core",
            "cBPF-JIT",
            "TODO",
            "arch supports cBPF JIT optimizations"
        ]),
        row(&["core", "eBPF-JIT", "ok", "arch supports eBPF JIT"]),
    );
    assert_eq!(
        main_rules(&html),
        "Subsystem Feature Status Description Notes\n\
         core cBPF-JIT TODO arch supports cBPF JIT optimizations\n\
         core eBPF-JIT ok arch supports eBPF JIT"
    );
    // Too few words in all, or mostly links: dropped as a whole, as a block would be.
    assert_eq!(main_rules(&row(&["a", "b", "c"])), "");
    let links = row(&["<a href=1>Home page</a>", "<a href=2>About us</a>", "Top"]);
    assert_eq!(main_rules(&links), "");
    // A layout row: a menu cell beside an article of more than MAX_ROW_WORDS words.
    let article = "Words of the article that this layout table holds. ".repeat(8);
    let layout = row(&["<a href=1>Home</a>", "Menu", article.trim()]);
    assert_eq!(main_rules(&layout), article.trim());
    // A row holding a table is a layout row too: its own blocks keep the rules.
    let nested = format!(
        "<table><tr><td><p>Menu</p></td><td><table>{}</table><p>{}</p></td></tr></table>",
        row(&["x", "y"]),
        "An article paragraph beside the menu cell."
    );
    assert_eq!(
        main_rules(&nested),
        "An article paragraph beside the menu cell."
    );
    // A boilerplate container inside the row keeps its lines out of the row.
    let boiler = "<table><tr><td><p>core</p></td><td><div class=share><p>Share this</p></div>\
                  </td><td><p>one two three four</p></td></tr></table>";
    assert_eq!(main_rules(boiler), "core one two three four");
}
