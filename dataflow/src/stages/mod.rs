//! The stages of the job, in the order documents pass through them. Each module holds one
//! stage's operators; what a stage hands to a later one travels in the records of
//! [`crate::records`] or is passed to the later stage's constructor explicitly.
//!
//! | stage | module | what it does |
//! |---|---|---|
//! | templates | [`templates`] | before the main dataflow: each host's site template, from blocks counted at the host's worker |
//! | read | [`read`] | each worker reads its own units, a batch per timestamp |
//! | fingerprint | [`fingerprint`] | at each document's home worker: parse, fingerprint, `fingerprints/` |
//! | | [`split`] | the documents' stream read once: records, document numbers, id hashes |
//! | exact | [`exact`] | fold documents with equal exact keys onto one representative |
//! | near search | [`near`] | enter representatives in the tables (or bands), search buckets |
//! | verify | [`verify`] | exact Jaccard (or signature) check of candidate pairs |
//! | | [`verify_inputs`] | the same within bounded memory: the sets made again from the inputs, for the documents in pairs, sorted on disk |
//! | urls | [`urls`] | pair documents with the same normalized URL (`url`); count cross-host pairs |
//! | pairs | [`pairs`] | write `pairs/` |
//! | clusters | [`clusters`] | union-find components, the kept document; what the clusters add up to |
//! | | [`stars`] | stars, one connected component at a time, from the edges sorted by component |
//! | | [`components`] | connected components by sorting, where the union-find would not fit its share |
//! | | [`cluster_rows`] | `clusters/`, a row per document at its home, by an external sort; the duplicate-id count |
//! | mirrors | [`mirrors`] | mirror hosts from clusters and URLs: `mirrors/`, `hosts/` |
//! | substrings | [`substrings`] | repeated passages: suffix arrays per worker, windows meet by key, `substrings/` |
//! | | [`substring_spill`] | the window records a worker owns, spilled in sorted runs past its memory share |

pub mod cluster_rows;
pub mod clusters;
pub mod components;
pub mod exact;
pub mod fingerprint;
pub mod mirrors;
pub mod near;
pub mod pairs;
pub mod read;
pub mod revisits;
pub mod split;
pub mod stars;
pub mod substring_spill;
pub mod substrings;
pub mod templates;
pub mod urls;
pub mod verify;
pub mod verify_inputs;
