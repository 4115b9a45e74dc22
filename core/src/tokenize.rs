//! Tokens: how text becomes words, exactly as the simhash-doc scheme defines them.
//!
//! 1. Characters of Unicode category Cf (format characters: soft hyphen, zero-width space,
//!    byte-order mark, ...) are dropped: they neither join nor split.
//! 2. A token is a maximal run of characters in the categories Ll Lu Lt Lo Lm Mn Nd Pc
//!    (letters, combining marks, decimal digits, connector punctuation such as `_`).
//! 3. Each token is lower-cased with the full Unicode mapping (`str::to_lowercase`, which
//!    also knows the Greek final sigma).
//!
//! The tokenizer reports every token with a flag saying whether it holds an alphabetic
//! character. The simhash-doc features keep only those (so pure numbers go, `4u2` stays);
//! the exact-duplicate key keeps all of them, because "2024" and "2025" are different
//! content.
//!
//! The ASCII fast path decides a byte's class with a table lookup; other characters go
//! through the Unicode general-category table.

use unicode_general_category::{get_general_category, GeneralCategory as Gc};

/// What a character does to tokenization.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum CharClass {
    /// Part of a token.
    Word,
    /// Ends the current token.
    Separator,
    /// Dropped without ending the token (category Cf).
    Ignored,
}

fn classify(ch: char) -> CharClass {
    if ch.is_ascii() {
        return if ch.is_ascii_alphanumeric() || ch == '_' {
            CharClass::Word
        } else {
            CharClass::Separator
        };
    }
    match get_general_category(ch) {
        Gc::LowercaseLetter
        | Gc::UppercaseLetter
        | Gc::TitlecaseLetter
        | Gc::OtherLetter
        | Gc::ModifierLetter
        | Gc::NonspacingMark
        | Gc::DecimalNumber
        | Gc::ConnectorPunctuation => CharClass::Word,
        Gc::Format => CharClass::Ignored,
        _ => CharClass::Separator,
    }
}

/// One token as the tokenizer hands it out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token<'a> {
    /// The lower-cased token.
    pub text: &'a str,
    /// Whether the token holds at least one alphabetic character.
    pub has_alpha: bool,
}

/// Splits text into lower-cased tokens. Holds reusable buffers, so one tokenizer per
/// thread tokenizes any number of documents without allocating per token.
#[derive(Default, Debug, Clone)]
pub struct Tokenizer {
    raw: String,
    lowered: String,
}

impl Tokenizer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Calls `f` for every token of `text`, in order.
    pub fn for_each_token(&mut self, text: &str, mut f: impl FnMut(Token<'_>)) {
        self.raw.clear();
        let mut has_alpha = false;
        let mut ascii_only = true;
        for ch in text.chars() {
            match classify(ch) {
                CharClass::Word => {
                    self.raw.push(ch);
                    has_alpha |= ch.is_alphabetic();
                    ascii_only &= ch.is_ascii();
                }
                CharClass::Ignored => {}
                CharClass::Separator => {
                    if !self.raw.is_empty() {
                        self.emit(has_alpha, ascii_only, &mut f);
                    }
                    has_alpha = false;
                    ascii_only = true;
                }
            }
        }
        if !self.raw.is_empty() {
            self.emit(has_alpha, ascii_only, &mut f);
        }
    }

    fn emit(&mut self, has_alpha: bool, ascii_only: bool, f: &mut impl FnMut(Token<'_>)) {
        let text = if ascii_only {
            self.raw.make_ascii_lowercase();
            self.raw.as_str()
        } else {
            // The full mapping can change length and depends on context (final sigma),
            // so it runs on the whole token, as `str::to_lowercase` defines it.
            self.lowered = self.raw.to_lowercase();
            self.lowered.as_str()
        };
        f(Token { text, has_alpha });
        self.raw.clear();
    }

    /// The tokens of `text` as owned strings (convenient in tests and tools).
    pub fn tokens(&mut self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        self.for_each_token(text, |t| out.push(t.text.to_string()));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alpha_tokens(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        Tokenizer::new().for_each_token(text, |t| {
            if t.has_alpha {
                out.push(t.text.to_string())
            }
        });
        out
    }

    #[test]
    fn golden_token_lists() {
        assert_eq!(
            alpha_tokens("The quick brown fox jumps over the lazy dog."),
            ["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog"]
        );
        assert_eq!(
            alpha_tokens("Ünïcödé façade — naïve café 123 4u2 x_y"),
            ["ünïcödé", "façade", "naïve", "café", "4u2", "x_y"]
        );
        assert_eq!(
            alpha_tokens("co\u{00AD}operate co\u{200B}operate"),
            ["cooperate", "cooperate"]
        );
        assert!(alpha_tokens("2024 12345 42").is_empty());
    }

    #[test]
    fn numbers_are_tokens_without_alpha() {
        let mut seen = Vec::new();
        Tokenizer::new().for_each_token("in 2024, 4u2", |t| {
            seen.push((t.text.to_string(), t.has_alpha))
        });
        assert_eq!(
            seen,
            [
                ("in".into(), true),
                ("2024".into(), false),
                ("4u2".into(), true)
            ]
        );
    }

    #[test]
    fn lowercasing_is_the_full_mapping() {
        // Final sigma: whole-token lower-casing, as str::to_lowercase does.
        assert_eq!(alpha_tokens("ΟΔΟΣ"), ["\u{3bf}\u{3b4}\u{3bf}\u{3c2}"]);
        assert_eq!(alpha_tokens("ΟΔΟΣ"), ["ΟΔΟΣ".to_lowercase()]);
        // İ lower-cases to two characters.
        assert_eq!(alpha_tokens("İstanbul"), ["İstanbul".to_lowercase()]);
    }

    #[test]
    fn combining_marks_stay_inside_tokens() {
        // "e" + U+0301 COMBINING ACUTE (Mn) is one token.
        assert_eq!(alpha_tokens("cafe\u{301} bar"), ["cafe\u{301}", "bar"]);
    }

    #[test]
    fn separators_split() {
        assert_eq!(
            alpha_tokens("a-b c.d e'f g\u{00A0}h"),
            ["a", "b", "c", "d", "e", "f", "g", "h"]
        );
    }
}
