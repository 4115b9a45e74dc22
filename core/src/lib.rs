//! neardup's algorithms: how a document becomes a fingerprint, and how fingerprints within
//! `k` bits of each other are found. No I/O and no dataflow here: every other crate builds on
//! this one.
//!
//! ```
//! use neardup_core::{encoding, hamming, Fingerprinter, Scheme};
//!
//! let mut fingerprinter = Fingerprinter::new(Scheme::simhash_doc());
//! let a = fingerprinter.fingerprint("The quick brown fox jumps over the lazy dog.");
//! assert_eq!(encoding::to_hex(a.simhash), "83052266e2554591");
//! assert_eq!(encoding::to_base32(a.simhash), "qmcsezxckvczc");
//!
//! let b = fingerprinter.fingerprint("The quick brown fox jumped over the lazy dog!");
//! assert!(hamming(a.simhash, b.simhash) < 16);
//! ```
//!
//! Finding all pairs within `k` bits with the permutation tables of Manku et al.:
//!
//! ```
//! use neardup_core::search::{find_pairs, BucketSearch, Item};
//! use neardup_core::TableDesign;
//!
//! let design = TableDesign::for_k(3).unwrap(); // manku16: 16 tables, 28-bit keys
//! let items = [Item { fp: 0xdead_beef, doc: 1 }, Item { fp: 0xdead_beee, doc: 2 }, Item { fp: !0, doc: 3 }];
//! let (pairs, _) = find_pairs(&design, &items, &BucketSearch::new(3));
//! assert_eq!(pairs.len(), 1);
//! assert_eq!((pairs[0].doc_a, pairs[0].doc_b, pairs[0].hamming), (1, 2, 1));
//! ```
//!
//! The pieces, in the order a document meets them:
//! - [`tokenize`]: text to lower-cased tokens (the simhash-doc rules);
//! - [`features`]: tokens to words, word shingles or character n-grams, and their 64-bit
//!   hashes ([`lookup3`] for simhash-doc, xxh3 otherwise); stop words;
//! - [`simhash`]: weighting (set, tf, tf-idf) and folding into 64 bits; Hamming distance;
//! - [`minhash`]: MinHash signatures, the Jaccard estimate, LSH banding;
//! - [`scheme`]: named recipes (`simhash-doc`, `simhash-shingles`, `minhash`) and the
//!   [`Fingerprinter`] that applies them;
//! - [`exact`]: 128-bit exact-duplicate keys;
//! - [`encoding`]: hex and base32 text forms;
//! - [`tables`]: permutation-table designs; [`search`]: exact bucket search; [`query`]:
//!   probing saved tables for the neighbours of one fingerprint (the index);
//! - [`similarity`]: Jaccard and containment; [`verdict`]: the rule deciding whether two
//!   documents are duplicates; [`unionfind`]: connected components;
//!   [`star`]: star clustering (the chaining guard);
//! - [`mix`]: well-mixed hashing for routing; [`quality`]: precision, recall, adjusted Rand index;
//!   [`eval`]: a run scored against a truth file (what `neardup eval` reports);
//! - [`urlnorm`]: URL normalization (URL duplicates); [`mirrors`]: mirror hosts.
//! - [`substrings`]: repeated passages (exact substrings of at least N bytes), their oracle
//!   and the suffix-array search.

pub mod encoding;
pub mod eval;
pub mod exact;
pub mod features;
pub mod lookup3;
pub mod minhash;
pub mod mirrors;
pub mod mix;
pub mod oph;
pub mod quality;
pub mod query;
pub mod scheme;
pub mod search;
pub mod simhash;
pub mod similarity;
pub mod star;
pub mod substrings;
pub mod tables;
#[doc(hidden)]
pub mod testing;
pub mod tokenize;
pub mod unionfind;
pub mod urlnorm;
pub mod verdict;

pub use scheme::{DocFingerprint, Fingerprinter, Method, Scheme, SchemeName, Sketch};
pub use simhash::{hamming, Weighting};
pub use similarity::DEFAULT_JACCARD;
pub use tables::{TableDesign, DEFAULT_K};
