//! Word differences between two texts, for showing a pair side by side.
//!
//! The idea: split both texts into words (runs of non-whitespace, with the whitespace
//! after them kept for display), find a longest common subsequence of the words, and mark
//! every word outside it. The longest common subsequence is the classic dynamic program,
//! O(n·m) time and memory, so only the first [`MAX_DIFF_WORDS`] words of each text are
//! compared; the rest of a longer text is shown unmarked after a note.

/// Words of each text compared: 800 × 800 cells of `u16` are 1.3 MB and take about a
/// millisecond per pair, and a pair is judged on its first screenful anyway.
pub const MAX_DIFF_WORDS: usize = 800;

/// One word of a text, with whether it is outside the common subsequence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Word<'a> {
    /// The word and the whitespace after it.
    pub text: &'a str,
    pub differs: bool,
}

/// The two texts as words, each marked where it differs from the other. Words beyond
/// [`MAX_DIFF_WORDS`] are returned with `differs = false`.
pub fn diff_words<'a>(a: &'a str, b: &'a str) -> (Vec<Word<'a>>, Vec<Word<'a>>) {
    let (wa, wb) = (split_words(a), split_words(b));
    let (na, nb) = (wa.len().min(MAX_DIFF_WORDS), wb.len().min(MAX_DIFF_WORDS));
    // Words compare as their letters and digits, lower-cased: case and punctuation do not
    // count, as for exact duplicates (docs/outputs.md, `exact`).
    let key = |w: &str| -> String {
        w.chars()
            .filter(|c| c.is_alphanumeric())
            .flat_map(char::to_lowercase)
            .collect()
    };
    let (ka, kb): (Vec<String>, Vec<String>) = (
        wa[..na].iter().map(|w| key(w)).collect(),
        wb[..nb].iter().map(|w| key(w)).collect(),
    );
    // lcs[i][j]: the longest common subsequence of ka[i..] and kb[j..].
    let width = nb + 1;
    let mut lcs = vec![0u16; (na + 1) * width];
    for i in (0..na).rev() {
        for j in (0..nb).rev() {
            lcs[i * width + j] = if ka[i] == kb[j] {
                lcs[(i + 1) * width + j + 1] + 1
            } else {
                lcs[(i + 1) * width + j].max(lcs[i * width + j + 1])
            };
        }
    }
    let mut da = vec![true; na];
    let mut db = vec![true; nb];
    let (mut i, mut j) = (0, 0);
    while i < na && j < nb {
        if ka[i] == kb[j] {
            da[i] = false;
            db[j] = false;
            i += 1;
            j += 1;
        } else if lcs[(i + 1) * width + j] >= lcs[i * width + j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    // Pieces without a letter or digit (a lone "!" or "—") are never marked.
    for (n, k) in ka.iter().enumerate() {
        da[n] &= !k.is_empty();
    }
    for (n, k) in kb.iter().enumerate() {
        db[n] &= !k.is_empty();
    }
    let mark = |words: Vec<&'a str>, differs: Vec<bool>| {
        words
            .into_iter()
            .enumerate()
            .map(|(n, text)| Word {
                text,
                differs: differs.get(n).copied().unwrap_or(false),
            })
            .collect()
    };
    (mark(wa, da), mark(wb, db))
}

/// Splits `text` into words, each with the whitespace that follows it (leading whitespace
/// is its own piece), so that the pieces concatenate to the text.
fn split_words(text: &str) -> Vec<&str> {
    let mut words = Vec::new();
    let mut start = 0;
    let mut in_space = true;
    for (i, c) in text.char_indices() {
        let space = c.is_whitespace();
        if !space && in_space && i > start {
            words.push(&text[start..i]);
            start = i;
        }
        in_space = space;
    }
    if start < text.len() {
        words.push(&text[start..]);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marked<'a>(words: &[Word<'a>]) -> Vec<&'a str> {
        words
            .iter()
            .filter(|w| w.differs)
            .map(|w| w.text.trim_end())
            .collect()
    }

    #[test]
    fn words_keep_every_byte() {
        let text = "  the quick\n brown  fox ";
        assert_eq!(split_words(text).concat(), text);
        assert_eq!(
            split_words(text),
            ["  ", "the ", "quick\n ", "brown  ", "fox "]
        );
    }

    #[test]
    fn only_the_changed_words_are_marked() {
        let (a, b) = diff_words("the quick brown fox jumps", "the slow brown fox jumps high");
        assert_eq!(marked(&a), ["quick"]);
        assert_eq!(marked(&b), ["slow", "high"]);
        let (a, b) = diff_words("Same words, here", "same WORDS here !");
        assert!(marked(&a).is_empty() && marked(&b).is_empty());
    }

    #[test]
    fn long_texts_are_compared_on_their_beginning() {
        let long: String = (0..MAX_DIFF_WORDS + 50).map(|i| format!("w{i} ")).collect();
        let (a, b) = diff_words(&long, "w0 other");
        assert_eq!(a.len(), MAX_DIFF_WORDS + 50);
        assert_eq!(marked(&b), ["other"]);
        assert!(a[MAX_DIFF_WORDS..].iter().all(|w| !w.differs));
    }
}
