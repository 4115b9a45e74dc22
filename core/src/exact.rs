//! Exact-duplicate keys: 128-bit content hashes.
//!
//! Two documents are exact duplicates when their *normalized token streams* are identical:
//! every token (numbers included, before any stop-word removal), lower-cased, joined by single
//! spaces. So whitespace, case and punctuation variants are exact duplicates, while a changed
//! number is not. [`raw_key`] hashes the bytes as they are, for users who want byte identity.
//! Both are xxh3-128: at a billion documents the chance of any collision is about 1e-21.

use xxhash_rust::xxh3::xxh3_128;

use crate::tokenize::Tokenizer;

/// The key of the raw bytes.
pub fn raw_key(bytes: &[u8]) -> u128 {
    xxh3_128(bytes)
}

/// The key of an already normalized token stream (tokens joined by single spaces).
pub fn token_stream_key(joined: &str) -> u128 {
    xxh3_128(joined.as_bytes())
}

/// [`token_stream_key`] of the joined tokens as bytes.
pub fn token_stream_key_bytes(joined: &[u8]) -> u128 {
    xxh3_128(joined)
}

/// The key of the normalized token stream of `text` (`buf` is reused between calls).
pub fn normalized_key(tokenizer: &mut Tokenizer, text: &str, buf: &mut String) -> u128 {
    buf.clear();
    tokenizer.for_each_token(text, |token| {
        if !buf.is_empty() {
            buf.push(' ');
        }
        buf.push_str(token.text);
    });
    token_stream_key(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(text: &str) -> u128 {
        normalized_key(&mut Tokenizer::new(), text, &mut String::new())
    }

    #[test]
    fn case_space_and_punctuation_variants_are_exact_duplicates() {
        assert_eq!(key("Hello,   World!"), key("hello world"));
        assert_eq!(key("hello\n\tworld..."), key("HELLO WORLD"));
    }

    #[test]
    fn numbers_and_words_matter() {
        assert_ne!(key("born in 2024"), key("born in 2025"));
        assert_ne!(key("hello world"), key("hello there world"));
        assert_ne!(key("ab c"), key("a bc"));
    }

    #[test]
    fn raw_key_sees_every_byte() {
        assert_ne!(raw_key(b"hello world"), raw_key(b"hello  world"));
        assert_eq!(raw_key(b"x"), xxh3_128(b"x"));
    }
}
