//! HTML (already UTF-8) to text, in one pass over html5ever's tokenizer.
//!
//! No DOM is built. html5ever's tokenizer (the WHATWG tokenizer: character references,
//! comments, CDATA, raw-text elements) hands over tokens, and the extractor keeps a flat
//! stack of the open elements that matter, so a page nested 100,000 levels deep costs a
//! `Vec` of 100,000 entries and no recursion. The rules of `text` mode:
//!
//! * **Invisible content is dropped**: `head` (its `title` is captured into
//!   [`Extracted::title`](super::Extracted::title), the first one only), `script`, `style`,
//!   `template`, `noscript` (the page is read as a browser with scripts on shows it),
//!   `iframe`, `noembed`, `noframes`, `object`, `svg` and `math` (their text is labels and
//!   formulas, not prose), the form controls `textarea`, `select`, `datalist` and
//!   `button`, and every element with the `hidden` attribute or an inline
//!   `style="display:none"`. Comments and CDATA sections (a comment in HTML) are dropped.
//! * **Block elements end lines** ([`BLOCK_TAGS`]: `p`, `div`, `li`, `h1`-`h6`, `tr`,
//!   `section`, `article`, `blockquote`, `pre`, `table`, ...; and `br`, `hr`): a line
//!   ends where one opens and where one closes; empty lines are not written.
//! * **Cells and images separate words**: `td`, `th` and `img` put a space between the text
//!   before and after them, not a line break.
//! * **Entities are decoded** by the tokenizer (all named and numeric references, with the
//!   WHATWG rules for missing semicolons and invalid numbers).
//! * **Whitespace is collapsed**: every run of Unicode whitespace (including U+00A0) within
//!   a line becomes one space, and lines have no leading or trailing space. `pre` is
//!   collapsed like everything else: fingerprints ignore layout.
//!
//! **Closing elements.** The tokenizer reports tags, not a tree. A start tag pushes a
//! non-void element; an end tag pops the stack down to the nearest open element of its
//! name, as the HTML tree builder does, closing whatever was left open inside it; an end
//! tag with no open element of its name among the top [`MAX_END_TAG_SEARCH`] entries is
//! ignored (so stray end tags cost a bounded search, never a quadratic one), and so is one
//! that would have to close an element hiding its content (a `template`, a `select`, a
//! dropped menu) to reach its own: markup inside hidden content stays inside. A new `p`,
//! `li`, `dt`, `dd`, `option`, `tr`, `td` or `th` closes an open one of the same kind on top
//! of the stack (the optional end tags), a new `a` ends an open `a`, and `head` ends at
//! `</head>`, at `<body>`, at text, or at the first start tag that cannot be in a head, as
//! in a browser.

use std::cell::RefCell;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, Tag, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};
use html5ever::LocalName;

use super::main_content;
use super::template::HostTemplate;
use super::Extracted;

/// Elements whose start and end tags end the current line.
pub const BLOCK_TAGS: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "body",
    "caption",
    "center",
    "dd",
    "details",
    "dialog",
    "dir",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "frameset",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hgroup",
    "html",
    "legend",
    "li",
    "listing",
    "main",
    "menu",
    "nav",
    "ol",
    "p",
    "plaintext",
    "pre",
    "section",
    "summary",
    "table",
    "tbody",
    "tfoot",
    "thead",
    "tr",
    "ul",
    "xmp",
];

/// An end tag whose element is not among this many innermost open elements is ignored.
/// Real pages close what they opened a few levels up; 256 covers any closing that matters
/// while a page of a million stray end tags costs at most 256 comparisons each.
pub const MAX_END_TAG_SEARCH: usize = 256;

/// How much of the input the tokenizer receives at a time: the tokenizer copies its input
/// into its own buffers, and feeding 1 MiB at a time keeps that copy small for a 50 MB page.
pub const FEED_CHUNK: usize = 1 << 20;

/// What an open element changed, to be undone when it closes.
const HIDES: u8 = 1;
const LINK: u8 = 2;
const TITLE: u8 = 4;
const HEAD: u8 = 8;
/// `main` mode: a container named as boilerplate (rule 3 of [`main_content`]).
const BOILER: u8 = 16;
/// `main` mode: a main-content signal (rule 1 of [`main_content`]).
const SIGNAL: u8 = 32;
/// `main` mode: a boilerplate container opened inside a main-content signal.
const BOILER_IN_SIGNAL: u8 = 64;

struct Open {
    name: LocalName,
    effects: u8,
}

/// How a tag name is treated: one lookup per tag.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Void elements: never pushed.
    Void,
    /// `br` and `hr`: void, and a line break.
    Break,
    /// `img`: void, and a word break.
    Image,
    Block,
    Cell,
    /// Content never shown; the raw-text ones switch the tokenizer's state.
    Hidden(Option<RawKind>),
    Title,
    Head,
    Body,
    Link,
    /// `plaintext`: the rest of the document is text.
    Plaintext,
    /// Everything else (inline elements, unknown names).
    Other,
}

#[cfg(test)]
pub(super) fn kind_is_block(name: &str) -> bool {
    matches!(kind(name), Kind::Block | Kind::Body | Kind::Plaintext)
}

fn kind(name: &str) -> Kind {
    match name {
        "area" | "base" | "basefont" | "bgsound" | "col" | "embed" | "input" | "keygen"
        | "link" | "meta" | "param" | "source" | "track" | "wbr" | "frame" => Kind::Void,
        "br" | "hr" => Kind::Break,
        "img" | "image" => Kind::Image,
        "td" | "th" => Kind::Cell,
        "script" => Kind::Hidden(Some(RawKind::ScriptData)),
        "style" | "noscript" | "iframe" | "noembed" | "noframes" => {
            Kind::Hidden(Some(RawKind::Rawtext))
        }
        "textarea" => Kind::Hidden(Some(RawKind::Rcdata)),
        "template" | "svg" | "math" | "select" | "datalist" | "button" | "object" => {
            Kind::Hidden(None)
        }
        "title" => Kind::Title,
        "head" => Kind::Head,
        "body" => Kind::Body,
        "a" => Kind::Link,
        "plaintext" => Kind::Plaintext,
        // BLOCK_TAGS, spelled out so that the compiler dispatches on length and bytes (a
        // test checks the two lists agree).
        "address" | "article" | "aside" | "blockquote" | "caption" | "center" | "dd"
        | "details" | "dialog" | "dir" | "div" | "dl" | "dt" | "fieldset" | "figcaption"
        | "figure" | "footer" | "form" | "frameset" | "h1" | "h2" | "h3" | "h4" | "h5" | "h6"
        | "header" | "hgroup" | "html" | "legend" | "li" | "listing" | "main" | "menu" | "nav"
        | "ol" | "p" | "pre" | "section" | "summary" | "table" | "tbody" | "tfoot" | "thead"
        | "tr" | "ul" | "xmp" => Kind::Block,
        _ => Kind::Other,
    }
}

/// Elements that may be in a `head`: any other start tag ends it.
fn in_head_allowed(name: &str) -> bool {
    matches!(
        name,
        "title" | "meta" | "link" | "style" | "script" | "base" | "noscript" | "template"
    )
}

/// Elements whose end tag is optional: a new one closes the open one on top of the stack.
fn closes_same(new: &str, open: &str) -> bool {
    match new {
        "p" | "li" | "option" | "tr" => new == open,
        "dt" | "dd" => matches!(open, "dt" | "dd"),
        "td" | "th" => matches!(open, "td" | "th"),
        _ => false,
    }
}

/// The extractor's state, inside a `RefCell` because html5ever's sink takes `&self`.
struct State<'t> {
    main: bool,
    /// `main` mode's block rules (4 and 5) apply: off in the structural fallback.
    block_rules: bool,
    /// The page's site template: its lines are dropped in every mode.
    template: HostTemplate<'t>,
    text: String,
    /// `main` mode: the lines kept inside main-content signals, by the same rules.
    signal_text: String,
    /// Open containers named as boilerplate, all of them and those inside a signal.
    boiler: usize,
    boiler_in_signal: usize,
    /// Open main-content signals.
    signals: usize,
    title: Option<String>,
    title_buf: String,
    stack: Vec<Open>,
    /// Open elements that hide their content.
    hidden: usize,
    /// Open `<a>` elements.
    links: usize,
    in_title: bool,
    in_head: bool,
    /// A space is owed before the next word on this line.
    space: bool,
    /// The current line: where it starts in `text`, its words and its bytes inside links.
    line_start: usize,
    words: usize,
    link_bytes: usize,
    /// `main` mode's block rules: the innermost table row being read, for rule 5's rows,
    /// and its words as one line (kept between rows, so that its buffer is reused).
    row: Option<Row>,
    row_text: String,
}

/// A table row as `main` mode reads it (rule 5 of [`main_content`]): where it began, and
/// its text as one line of words, in case its cells' short blocks make it one line.
struct Row {
    /// The row's element's place in the stack.
    depth: usize,
    /// Where the row's lines began in the text and in the signal text.
    text_start: usize,
    signal_start: usize,
    /// The row's words (its lines joined by spaces in `row_text`, less template and
    /// boilerplate lines, and only while they are at most `MAX_ROW_WORDS`: a longer row is
    /// never joined), and how many bytes of them were inside links.
    words: usize,
    link_bytes: usize,
    /// A line of the row was dropped as short (rule 5) alone.
    dropped_short: bool,
    /// A table opened inside the row: a layout row, read line by line.
    nested: bool,
    /// The open boilerplate containers where the row began: a line inside one opened in
    /// the row is left out of the joined row.
    containers: (usize, usize),
}

impl<'t> State<'t> {
    fn new(rules: Rules, template: HostTemplate<'t>, text: String, title_buf: String) -> Self {
        State {
            main: rules != Rules::Text,
            block_rules: rules == Rules::Main,
            template,
            text,
            signal_text: String::new(),
            boiler: 0,
            boiler_in_signal: 0,
            signals: 0,
            title: None,
            title_buf,
            stack: Vec::new(),
            hidden: 0,
            links: 0,
            in_title: false,
            in_head: false,
            space: false,
            line_start: 0,
            words: 0,
            link_bytes: 0,
            row: None,
            row_text: String::new(),
        }
    }

    /// Text outside tags.
    fn characters(&mut self, chars: &str) {
        if self.in_title {
            self.title_buf.push_str(chars);
            return;
        }
        if self.hidden > 0 {
            return;
        }
        if self.in_head {
            // Text in a head ends it, as in a browser; whitespace does not.
            if chars.chars().all(char::is_whitespace) {
                return;
            }
            self.close_head();
        }
        let mut first = true;
        for piece in chars.split(char::is_whitespace) {
            if !first {
                self.space = true;
            }
            first = false;
            if piece.is_empty() {
                continue;
            }
            if self.text.len() == self.line_start {
                self.words = 1;
            } else if self.space {
                self.text.push(' ');
                self.words += 1;
            }
            self.space = false;
            self.text.push_str(piece);
            if self.links > 0 {
                self.link_bytes += piece.len();
            }
        }
    }

    /// A block boundary: the current line ends. It is dropped if it is part of the site
    /// template, and in `main` mode if it fails the block rules or is inside a boilerplate
    /// container; in `main` mode, a line inside a main-content signal is also kept apart.
    fn end_line(&mut self) {
        self.space = false;
        if self.text.len() == self.line_start {
            return;
        }
        let line = &self.text[self.line_start..];
        let mut keep = !self.template.holds_line(line);
        let (boiler, boiler_in_signal) = (self.boiler, self.boiler_in_signal);
        let same_containers = |row: &&mut Row| row.containers == (boiler, boiler_in_signal);
        if let Some(row) = self.row.as_mut().filter(same_containers).filter(|_| keep) {
            if row.words + self.words <= main_content::MAX_ROW_WORDS {
                if !self.row_text.is_empty() {
                    self.row_text.push(' ');
                }
                self.row_text.push_str(line);
            }
            row.words += self.words;
            row.link_bytes += self.link_bytes;
            row.dropped_short |= self.words < main_content::MIN_BLOCK_WORDS;
        }
        if self.main {
            keep &= !self.block_rules
                || main_content::keep_block(self.words, line.len(), self.link_bytes);
            if keep && self.signals > 0 && self.boiler_in_signal == 0 {
                self.signal_text.push_str(line);
                self.signal_text.push('\n');
            }
            keep &= self.boiler == 0;
        }
        if keep {
            self.text.push('\n');
        } else {
            self.text.truncate(self.line_start);
        }
        self.line_start = self.text.len();
        self.words = 0;
        self.link_bytes = 0;
    }

    fn word_break(&mut self) {
        if self.text.len() > self.line_start {
            self.space = true;
        }
    }

    fn start_tag(&mut self, tag: &Tag) -> TokenSinkResult<()> {
        let name: &str = &tag.name;
        let kind = kind(name);
        if self.in_head && kind != Kind::Head && !in_head_allowed(name) {
            self.close_head();
        }
        if let Some(top) = self.stack.last() {
            if closes_same(name, &top.name) {
                self.pop();
            }
        }
        let mut effects = 0;
        let mut raw = None;
        match kind {
            Kind::Void => return TokenSinkResult::Continue,
            Kind::Break => {
                self.end_line();
                return TokenSinkResult::Continue;
            }
            Kind::Image => {
                self.word_break();
                return TokenSinkResult::Continue;
            }
            Kind::Block => self.end_line(),
            Kind::Cell => self.word_break(),
            Kind::Hidden(state) => {
                effects |= HIDES;
                raw = state;
            }
            Kind::Title => {
                // A title is never body text (a browser's style sheet hides it anywhere).
                effects |= HIDES;
                raw = Some(RawKind::Rcdata);
                if self.title.is_none() && self.hidden == 0 && !self.in_title {
                    effects |= TITLE;
                    self.in_title = true;
                    self.title_buf.clear();
                }
            }
            Kind::Head => {
                if !self.in_head {
                    effects |= HEAD;
                    self.in_head = true;
                }
            }
            Kind::Body => {
                self.close_head();
                self.end_line();
            }
            Kind::Link => {
                // A new link ends an open one, as the HTML parser's adoption agency does:
                // the text after it is no longer inside the first link.
                if self.links > 0 {
                    let window = self.stack.iter_mut().rev().take(MAX_END_TAG_SEARCH);
                    if let Some(open) = window.into_iter().find(|o| o.effects & LINK != 0) {
                        open.effects &= !LINK;
                        self.links -= 1;
                    }
                }
                effects |= LINK;
                self.links += 1;
            }
            Kind::Plaintext => {
                self.end_line();
                return TokenSinkResult::Plaintext;
            }
            Kind::Other => {}
        }
        // Raw-text elements stay open whatever their slash (`<script src=x />` swallows the
        // page in a browser too); others that close themselves open nothing.
        if tag.self_closing && raw.is_none() {
            return TokenSinkResult::Continue;
        }
        if effects & HIDES == 0 && hidden_by_attributes(tag) {
            effects |= HIDES;
        }
        if self.main && effects & HIDES == 0 {
            effects |= self.main_rules(name, kind, &tag.attrs);
        }
        if effects & HIDES != 0 {
            self.hidden += 1;
        }
        self.signals += usize::from(effects & SIGNAL != 0);
        self.boiler += usize::from(effects & BOILER != 0);
        self.boiler_in_signal += usize::from(effects & BOILER_IN_SIGNAL != 0);
        self.stack.push(Open {
            name: tag.name.clone(),
            effects,
        });
        if self.block_rules && effects & HIDES == 0 {
            self.track_row(name);
        }
        match raw {
            Some(kind) => TokenSinkResult::RawData(kind),
            None => TokenSinkResult::Continue,
        }
    }

    /// What `main` mode's element rules make of an element that does not hide its content
    /// otherwise: hidden (a boilerplate element, or an inline container named as
    /// boilerplate), a signal, or a block container named as boilerplate, whose lines are
    /// left out of the main text when they end while it is open.
    fn main_rules(&self, name: &str, kind: Kind, attrs: &[html5ever::Attribute]) -> u8 {
        if main_content::is_boilerplate_tag(name) {
            return HIDES;
        }
        if main_content::is_main_signal(name, attrs) {
            return SIGNAL;
        }
        if !main_content::is_boilerplate_by_names(name, attrs) {
            return 0;
        }
        match (kind, self.signals > 0) {
            (Kind::Block, false) => BOILER,
            (Kind::Block, true) => BOILER | BOILER_IN_SIGNAL,
            _ => HIDES,
        }
    }

    fn end_tag(&mut self, tag: &Tag) {
        let name: &str = &tag.name;
        let kind = kind(name);
        match kind {
            // `</br>` is a `<br>` in a browser; other void end tags are nothing.
            Kind::Break => return self.end_line(),
            Kind::Void | Kind::Image => return,
            Kind::Head => self.close_head(),
            _ => {}
        }
        // The innermost open element of this name, not beyond the search window nor past an
        // element that hides its content (markup inside a template, a select or a dropped
        // menu cannot close what is outside it).
        let mut found = None;
        for (at, open) in self.stack.iter().enumerate().rev().take(MAX_END_TAG_SEARCH) {
            if open.name == tag.name {
                found = Some(at);
                break;
            }
            if open.effects & HIDES != 0 {
                break;
            }
        }
        if let Some(at) = found {
            // The line inside a block ends with the state it was written in.
            if matches!(kind, Kind::Block | Kind::Body) {
                self.end_line();
            }
            while self.stack.len() > at {
                self.pop();
            }
        }
        match kind {
            Kind::Block | Kind::Body => self.end_line(),
            Kind::Cell => self.word_break(),
            _ => {}
        }
    }

    /// `main` mode's block rules: a `tr` opened outside any tracked row starts one; a
    /// `table` inside it makes it a layout row.
    fn track_row(&mut self, name: &str) {
        match (name, self.row.as_mut()) {
            ("tr", None) => {
                self.row_text.clear();
                self.row = Some(Row {
                    depth: self.stack.len() - 1,
                    text_start: self.text.len(),
                    signal_start: self.signal_text.len(),
                    words: 0,
                    link_bytes: 0,
                    dropped_short: false,
                    nested: false,
                    containers: (self.boiler, self.boiler_in_signal),
                })
            }
            ("table", Some(row)) => row.nested = true,
            _ => {}
        }
    }

    /// The tracked row ends (rule 5 of [`main_content`]): when a line of it was dropped as
    /// short, its lines give way to the row as one line, judged by the block rules as a
    /// whole, as a row of plain cells already is.
    fn finish_row(&mut self) {
        self.end_line();
        let Some(row) = self.row.take() else { return };
        if !row.dropped_short
            || row.nested
            || self.row_text.is_empty()
            || row.words > main_content::MAX_ROW_WORDS
        {
            return;
        }
        self.text.truncate(row.text_start);
        self.signal_text.truncate(row.signal_start);
        self.line_start = self.text.len();
        self.text.push_str(&self.row_text);
        self.words = row.words;
        self.link_bytes = row.link_bytes;
        self.end_line();
    }

    /// Closes the innermost open element, undoing what it changed.
    fn pop(&mut self) {
        if self
            .row
            .as_ref()
            .is_some_and(|row| row.depth + 1 == self.stack.len())
        {
            self.finish_row();
        }
        let Some(open) = self.stack.pop() else { return };
        if open.effects & HIDES != 0 {
            self.hidden -= 1;
        }
        if open.effects & LINK != 0 {
            self.links -= 1;
        }
        self.signals -= usize::from(open.effects & SIGNAL != 0);
        self.boiler -= usize::from(open.effects & BOILER != 0);
        self.boiler_in_signal -= usize::from(open.effects & BOILER_IN_SIGNAL != 0);
        if open.effects & HEAD != 0 {
            self.in_head = false;
        }
        if open.effects & TITLE != 0 {
            self.in_title = false;
            let mut title = String::with_capacity(self.title_buf.len());
            for word in self.title_buf.split_whitespace() {
                if !title.is_empty() {
                    title.push(' ');
                }
                title.push_str(word);
            }
            if !title.is_empty() {
                self.title = Some(title);
            }
        }
    }

    /// `head` ends: pop it if it is open (with whatever is still open inside it).
    fn close_head(&mut self) {
        if !self.in_head {
            return;
        }
        if let Some(at) = self.stack.iter().rposition(|o| o.effects & HEAD != 0) {
            while self.stack.len() > at {
                self.pop();
            }
        }
        self.in_head = false;
    }

    fn finish(&mut self) {
        while !self.stack.is_empty() {
            self.pop();
        }
        self.end_line();
        // Rule 1: the lines inside main-content signals, when they are enough (any, in the
        // structural fallback).
        let enough = match self.block_rules {
            true => main_content::MIN_MAIN_BYTES,
            false => 1,
        };
        if self.main && self.signal_text.len() >= enough {
            std::mem::swap(&mut self.text, &mut self.signal_text);
        }
        if self.text.ends_with('\n') {
            self.text.pop();
        }
    }
}

/// The `hidden` attribute, or an inline style with `display:none`.
fn hidden_by_attributes(tag: &Tag) -> bool {
    tag.attrs.iter().any(|attr| match &*attr.name.local {
        "hidden" => true,
        "style" => {
            let style = attr.value.as_bytes();
            style
                .windows(7)
                .enumerate()
                .filter(|(_, w)| w.eq_ignore_ascii_case(b"display"))
                .any(|(at, _)| {
                    let rest = style[at + 7..]
                        .iter()
                        .copied()
                        .filter(|b| !b.is_ascii_whitespace());
                    let mut expected = b":none".iter().copied();
                    rest.zip(&mut expected)
                        .all(|(a, b)| a.to_ascii_lowercase() == b)
                        && expected.next().is_none()
                })
        }
        _ => false,
    })
}

struct Sink<'t>(RefCell<State<'t>>);

impl TokenSink for Sink<'_> {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        let mut state = self.0.borrow_mut();
        match token {
            Token::CharacterTokens(chars) => state.characters(&chars),
            Token::TagToken(tag) => match tag.kind {
                TagKind::StartTag => return state.start_tag(&tag),
                TagKind::EndTag => state.end_tag(&tag),
            },
            // Comments (and CDATA, a comment in HTML), doctypes, NULs, parse errors.
            _ => {}
        }
        TokenSinkResult::Continue
    }
}

/// Which rules [`extract_text`] applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Rules {
    /// `text` mode's.
    Text,
    /// `main` mode's on top of them (rules 1 to 6 of [`main_content`]).
    Main,
    /// `main` mode's structural rules only (1, 2, 3 and 6), without the block rules: the
    /// first fallback of rule 7.
    MainStructure,
}

/// HTML to text by `rules`, less the lines of `template`. Reuses `out`'s text buffer.
pub(super) fn extract_text(
    html: &str,
    rules: Rules,
    template: HostTemplate<'_>,
    out: &mut Extracted,
) {
    let mut text = std::mem::take(&mut out.text);
    text.clear();
    text.reserve(html.len() / 4);
    let title_buf = out.title.take().unwrap_or_default();
    let state = State::new(rules, template, text, title_buf);
    let tokenizer = Tokenizer::new(Sink(RefCell::new(state)), TokenizerOpts::default());
    let queue = BufferQueue::default();
    let mut rest = html;
    while !rest.is_empty() {
        let mut cut = rest.len().min(FEED_CHUNK);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        queue.push_back(StrTendril::from_slice(&rest[..cut]));
        rest = &rest[cut..];
        // The sink never asks for a script to run, so feeding ends only with the input.
        let _ = tokenizer.feed(&queue);
    }
    tokenizer.end();
    let mut state = tokenizer.sink.0.into_inner();
    state.finish();
    out.text = state.text;
    out.title = state.title;
}
