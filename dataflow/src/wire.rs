//! Records as they cross processes: no wider than their values.
//!
//! timely serializes what goes between processes with bincode, which writes every integer
//! at its full width: a [`TableRecord`](crate::records::TableRecord) took 36 bytes, though
//! its lane base is below a few hundred, its lane mask has one bit per table of one round,
//! its document number is a small file number and a record number within the file, and its
//! rank is 0 under `--keep first`. At 16 processes a fingerprint sends one table record to
//! each of about 10 other workers, so these 36 bytes were most of the bytes of a run
//! (docs/performance.md). Documents ([`DocFp`](crate::records::DocFp), to the exact stage
//! and in resume parts) and pairs ([`Edge`](crate::records::Edge)) travel the same way.
//!
//! The simple version is `#[derive(Serialize, Deserialize)]`. Here the record is written
//! first into a few bytes of its own ([`Compact`]: integers as LEB128 varints, hashes
//! whole, absent fields as bits of a flags byte), and those bytes go to the serializer as a
//! tuple of `u8`s, which bincode writes one byte each with no length in front; the
//! deserializer reads the bytes back one at a time and stops where the record ends. A
//! simhash table record takes about 16 bytes, a document 39, a near pair about 12.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, SeqAccess, Visitor};
use serde::ser::SerializeTuple;
use serde::{Deserializer, Serializer};

/// The longest varint of a `u64`.
const VARINT_MAX: usize = 10;

/// A record with a compact encoding of its own, written into `out` and read back from
/// `bytes` (one at a time, as the deserializer gives them).
pub trait Compact: Sized {
    /// What [`Compact::encode`] usually writes at most (a capacity, not a limit).
    const MAX_BYTES: usize;

    fn encode(&self, out: &mut Vec<u8>);

    /// `None` when the bytes end too soon or a varint runs too long.
    fn decode(bytes: &mut dyn FnMut() -> Option<u8>) -> Option<Self>;
}

pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub fn get_varint(bytes: &mut dyn FnMut() -> Option<u8>) -> Option<u64> {
    let mut v = 0u64;
    for i in 0..VARINT_MAX {
        let b = bytes()?;
        v |= ((b & 0x7f) as u64) << (7 * i);
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

pub fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub fn get_u64(bytes: &mut dyn FnMut() -> Option<u8>) -> Option<u64> {
    let mut le = [0u8; 8];
    for b in &mut le {
        *b = bytes()?;
    }
    Some(u64::from_le_bytes(le))
}

pub fn put_u128(out: &mut Vec<u8>, v: u128) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub fn get_u128(bytes: &mut dyn FnMut() -> Option<u8>) -> Option<u128> {
    let lo = get_u64(bytes)? as u128;
    let hi = get_u64(bytes)? as u128;
    Some(hi << 64 | lo)
}

/// A string as its length (a varint) and its UTF-8 bytes.
pub fn put_str(out: &mut Vec<u8>, s: &str) {
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

pub fn get_str(bytes: &mut dyn FnMut() -> Option<u8>) -> Option<String> {
    let len = get_varint(bytes)?;
    // No reservation from the length alone: a corrupt one must not allocate.
    let mut s = Vec::with_capacity(len.min(4096) as usize);
    for _ in 0..len {
        s.push(bytes()?);
    }
    String::from_utf8(s).ok()
}

/// A number as its high and its low `low_bits` bits, each a varint: a few bytes for a
/// document number ([`crate::records::doc_id`]: the file above, the record within it below)
/// where the number takes 8.
pub fn put_split(out: &mut Vec<u8>, v: u64, low_bits: u32) {
    put_varint(out, v >> low_bits);
    put_varint(out, v & ((1 << low_bits) - 1));
}

/// Reads back what [`put_split`] wrote; `None` where a part is out of its range.
pub fn get_split(bytes: &mut dyn FnMut() -> Option<u8>, low_bits: u32) -> Option<u64> {
    let (high, low) = (get_varint(bytes)?, get_varint(bytes)?);
    (high >> (64 - low_bits) == 0 && low >> low_bits == 0).then_some(high << low_bits | low)
}

/// A rank as a varint: ranks near 0 (`first`, `shortest`) and near `u64::MAX` (`longest`,
/// `max:`) are both short. The lowest bit says which end it is counted from.
pub fn put_rank(out: &mut Vec<u8>, rank: u64) {
    if rank > u64::MAX / 2 {
        put_varint(out, (!rank) << 1 | 1);
    } else {
        put_varint(out, rank << 1);
    }
}

pub fn get_rank(bytes: &mut dyn FnMut() -> Option<u8>) -> Option<u64> {
    let v = get_varint(bytes)?;
    Some(if v & 1 == 1 { !(v >> 1) } else { v >> 1 })
}

/// Serializes `record` through its [`Compact`] bytes (module docs).
///
/// Every record crosses here twice on its way to another process (once to be counted,
/// once to be written), so the bytes go to a buffer of the thread's, not a new one each
/// time (a fresh one only where a record serializes inside another's encoding).
pub fn serialize<T: Compact, S: Serializer>(record: &T, s: S) -> Result<S::Ok, S::Error> {
    thread_local! {
        static BYTES: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let write = |bytes: &mut Vec<u8>| {
        bytes.clear();
        record.encode(bytes);
        let mut tuple = s.serialize_tuple(bytes.len())?;
        for b in bytes.iter() {
            tuple.serialize_element(b)?;
        }
        tuple.end()
    };
    BYTES.with(|cell| match cell.try_borrow_mut() {
        Ok(mut bytes) => write(&mut bytes),
        Err(_) => write(&mut Vec::with_capacity(T::MAX_BYTES)),
    })
}

/// Reads back what [`serialize`] wrote.
pub fn deserialize<'de, T: Compact, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
    struct Bytes<T>(PhantomData<T>);
    impl<'de, T: Compact> Visitor<'de> for Bytes<T> {
        type Value = T;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "a compact record")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<T, A::Error> {
            let mut error = None;
            let mut next = || match seq.next_element::<u8>() {
                Ok(b) => b,
                Err(e) => {
                    error = Some(e);
                    None
                }
            };
            let record = T::decode(&mut next);
            match (record, error) {
                (_, Some(e)) => Err(e),
                (Some(r), None) => Ok(r),
                (None, None) => Err(de::Error::custom("a compact record ends too soon")),
            }
        }
    }
    // The length is only an upper bound: bincode reads elements while the visitor asks
    // (and writes no length for a tuple), so the record's own bytes say where it ends.
    d.deserialize_tuple(usize::MAX, Bytes(PhantomData))
}

/// `Serialize` and `Deserialize` for records with a [`Compact`] form, through
/// [`serialize`] and [`deserialize`].
macro_rules! serde_by_compact {
    ($($t:ty),*) => {$(
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                $crate::wire::serialize(self, s)
            }
        }

        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $crate::wire::deserialize(d)
            }
        }
    )*};
}
pub(crate) use serde_by_compact;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_ranks_round_trip_at_every_width() {
        let mut state = 3u64;
        let mut values: Vec<u64> = vec![
            0,
            1,
            127,
            128,
            16_383,
            16_384,
            u64::MAX / 2,
            u64::MAX / 2 + 1,
        ];
        values.extend([u64::MAX - 1, u64::MAX]);
        for shift in 0..64 {
            let r = neardup_core::mix::splitmix64(&mut state);
            values.push(r >> shift);
            values.push(u64::MAX - (r >> shift));
        }
        for v in values {
            for (put, get) in [
                (
                    put_varint as fn(&mut Vec<u8>, u64),
                    get_varint as fn(&mut dyn FnMut() -> Option<u8>) -> Option<u64>,
                ),
                (put_rank, get_rank),
                (put_u64, get_u64),
            ] {
                let mut out = Vec::new();
                put(&mut out, v);
                assert!(out.len() <= VARINT_MAX, "{v}: {} bytes", out.len());
                let mut it = out.iter().copied();
                assert_eq!(get(&mut || it.next()), Some(v));
                assert_eq!(it.next(), None, "{v}: bytes left over");
                // One byte short is an error, never a value.
                let mut short = out[..out.len() - 1].iter().copied();
                assert_eq!(get(&mut || short.next()), None);
            }
        }
    }

    #[test]
    fn small_ranks_at_either_end_are_short() {
        let len = |v| {
            let mut out = Vec::new();
            put_rank(&mut out, v);
            out.len()
        };
        assert_eq!(len(0), 1);
        assert_eq!(len(u64::MAX), 1);
        assert_eq!(len(u64::MAX - 5_000), 2);
        assert_eq!(len(5_000), 2);
    }

    #[test]
    fn a_run_on_varint_is_an_error() {
        let mut it = std::iter::repeat(0xffu8);
        assert_eq!(get_varint(&mut || it.next()), None);
    }
}
