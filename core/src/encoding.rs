//! Text forms of a 64-bit fingerprint.
//!
//! A fingerprint is serialized as its 8 big-endian octets, written either as 16 lower-case
//! hex digits or in the RFC 4648 base32 alphabet, lower case, without padding (13
//! characters). Both are read case-insensitively.

use data_encoding::BASE32_NOPAD;

/// A fingerprint string that could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FingerprintParseError {
    #[error(
        "fingerprint {0:?} has {1} characters: expected 16 hex digits or 13 base32 characters"
    )]
    Length(String, usize),
    #[error("fingerprint {0:?} is not valid hex: {1}")]
    Hex(String, String),
    #[error("fingerprint {0:?} is not valid base32 (alphabet a-z, 2-7): {1}")]
    Base32(String, String),
}

/// 16 lower-case hex digits.
pub fn to_hex(fp: u64) -> String {
    format!("{fp:016x}")
}

/// 13 lower-case base32 characters (RFC 4648 alphabet, no padding).
pub fn to_base32(fp: u64) -> String {
    BASE32_NOPAD.encode(&fp.to_be_bytes()).to_ascii_lowercase()
}

/// Reads 16 hex digits, any case.
pub fn from_hex(text: &str) -> Result<u64, FingerprintParseError> {
    if text.len() != 16 {
        return Err(FingerprintParseError::Length(
            text.into(),
            text.chars().count(),
        ));
    }
    u64::from_str_radix(text, 16)
        .map_err(|e| FingerprintParseError::Hex(text.into(), e.to_string()))
}

/// Reads 13 base32 characters, any case.
pub fn from_base32(text: &str) -> Result<u64, FingerprintParseError> {
    if text.len() != 13 {
        return Err(FingerprintParseError::Length(
            text.into(),
            text.chars().count(),
        ));
    }
    let bytes = BASE32_NOPAD
        .decode(text.to_ascii_uppercase().as_bytes())
        .map_err(|e| FingerprintParseError::Base32(text.into(), e.to_string()))?;
    let octets: [u8; 8] = bytes.try_into().map_err(|_| {
        FingerprintParseError::Base32(text.into(), "does not decode to 8 octets".into())
    })?;
    Ok(u64::from_be_bytes(octets))
}

/// Reads either form, told apart by length.
pub fn parse_fingerprint(text: &str) -> Result<u64, FingerprintParseError> {
    match text.len() {
        16 => from_hex(text),
        13 => from_base32(text),
        n => Err(FingerprintParseError::Length(text.into(), n)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_base32_vectors() {
        for (hex, b32) in [
            ("0000000000000000", "aaaaaaaaaaaaa"),
            ("30e7840624325000", "gdtyibregjiaa"),
            ("83052266e2554591", "qmcsezxckvczc"),
            ("0506620030f44080", "audgeabq6raia"),
            ("850322a04a503246", "qubsfickkazem"),
            ("009409fb4f405d21", "ackat62pibosc"),
        ] {
            let fp = from_hex(hex).unwrap();
            assert_eq!(to_base32(fp), b32);
            assert_eq!(to_hex(fp), hex);
            assert_eq!(from_base32(b32).unwrap(), fp);
            assert_eq!(from_base32(&b32.to_uppercase()).unwrap(), fp);
            assert_eq!(parse_fingerprint(&hex.to_uppercase()).unwrap(), fp);
        }
    }

    #[test]
    fn round_trips() {
        let mut state = 7;
        for _ in 0..1000 {
            let fp = crate::mix::splitmix64(&mut state);
            assert_eq!(from_base32(&to_base32(fp)).unwrap(), fp);
            assert_eq!(from_hex(&to_hex(fp)).unwrap(), fp);
        }
    }

    #[test]
    fn bad_strings_are_clear_errors() {
        assert!(matches!(
            parse_fingerprint("abc"),
            Err(FingerprintParseError::Length(_, 3))
        ));
        assert!(matches!(
            from_hex("zz00000000000000"),
            Err(FingerprintParseError::Hex(..))
        ));
        assert!(matches!(
            from_base32("1aaaaaaaaaaaa"),
            Err(FingerprintParseError::Base32(..))
        ));
        // The last base32 character carries 4 bits of data and 1 bit that must be zero.
        assert!(matches!(
            from_base32("aaaaaaaaaaaab"),
            Err(FingerprintParseError::Base32(..))
        ));
        let msg = parse_fingerprint("abc").unwrap_err().to_string();
        assert!(
            msg.contains("16 hex digits") && msg.contains("13 base32"),
            "{msg}"
        );
    }
}
