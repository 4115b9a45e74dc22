//! Prints the text of one HTML file as neardup extracts it, to look at the rules at work:
//!
//! ```text
//! cargo run -p neardup-io --example html_to_text -- page.html [text|main|none] [CONTENT-TYPE]
//! ```
//!
//! The title, charset and replacement count go to stderr, the text to stdout.

use neardup_io::html::{html_document, HtmlMode, DEFAULT_HTML_MODE};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: html_to_text FILE [text|main|none] [CONTENT-TYPE]");
        std::process::exit(2);
    };
    let mode = match args.get(1) {
        Some(name) => HtmlMode::parse(name).unwrap_or_else(|| {
            eprintln!("unknown mode {name:?}: text, main or none");
            std::process::exit(2)
        }),
        None => DEFAULT_HTML_MODE,
    };
    let bytes = std::fs::read(path).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(1)
    });
    let content_type = args.get(2).map_or("text/html", String::as_str);
    let doc = html_document(&bytes, Some(content_type), mode);
    eprintln!(
        "title: {:?}, charset: {}, replacements: {}",
        doc.title, doc.charset, doc.replacements
    );
    println!("{}", doc.text);
}
