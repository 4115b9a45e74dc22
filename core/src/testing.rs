//! Test support shared by every crate's tests; not part of the API (hidden from the docs,
//! and no stability promise).

use crate::mix::splitmix64;

/// A small seeded generator for tests: splitmix64, fixed here so generated corpora and
/// fingerprints never change with a dependency's version (as `rand`'s generators may).
///
/// ```
/// use neardup_core::testing::SeededRng;
///
/// let mut rng = SeededRng::new(7);
/// let words = rng.words(3);
/// assert_eq!(words, SeededRng::new(7).words(3));
/// assert!(words.iter().all(|w| (4..=10).contains(&w.len())));
/// ```
#[derive(Clone, Debug)]
pub struct SeededRng(u64);

impl SeededRng {
    pub fn new(seed: u64) -> Self {
        SeededRng(seed)
    }

    /// The next value of the splitmix64 sequence.
    pub fn next_u64(&mut self) -> u64 {
        splitmix64(&mut self.0)
    }

    /// A value in `0..n` (`n > 0`; the slight modulo bias does not matter to tests).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// A made-up lower-case word of 4 to 10 letters: practically never repeated.
    pub fn word(&mut self) -> String {
        let len = 4 + self.below(7);
        (0..len)
            .map(|_| char::from(b'a' + self.below(26) as u8))
            .collect()
    }

    /// `n` made-up words.
    pub fn words(&mut self, n: usize) -> Vec<String> {
        (0..n).map(|_| self.word()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequence_is_splitmix64() {
        // Reference outputs of splitmix64 seeded with 0 (from the generator's C reference).
        let mut rng = SeededRng::new(0);
        assert_eq!(rng.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(rng.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn words_are_lower_case_letters_of_4_to_10() {
        let mut rng = SeededRng::new(0x5EED);
        let words = rng.words(2000);
        assert!(words
            .iter()
            .all(|w| (4..=10).contains(&w.len()) && w.bytes().all(|b| b.is_ascii_lowercase())));
        for len in 4..=10 {
            assert!(words.iter().any(|w| w.len() == len), "no word of {len}");
        }
        assert!((0..1000).all(|_| rng.below(3) < 3));
    }
}
