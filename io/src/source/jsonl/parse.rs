//! Reading one JSONL line into a [`Record`]: the common lines through the direct scanner
//! (`fast`), every other line through serde_json (`serde_path`).

use super::fast;
use super::serde_path::parse_record_serde;
use crate::record::{FieldSpec, Record, RecordError};

/// Parses one JSONL line and extracts the fields named in `spec`.
///
/// Keys other than the wanted ones are skipped without being built. If a key
/// appears twice, the last value wins (as in most JSON libraries).
pub fn parse_record(line: &[u8], spec: &FieldSpec) -> Result<Record, RecordError> {
    let mut record = Record::default();
    parse_record_into(line, spec, &mut record)?;
    Ok(record)
}

/// [`parse_record`] into `record`, reusing its buffers: one call per line allocates
/// nothing once the buffers are large enough. On error `record` holds no useful value.
///
/// The common lines (an object whose wanted fields are strings, or an id that is a
/// non-negative integer, and whose other values are strings, numbers, booleans or null)
/// are read by a direct scanner; any other line, and every line with an error, goes
/// through serde_json, so results and error messages are the same either way.
pub fn parse_record_into(
    line: &[u8],
    spec: &FieldSpec,
    record: &mut Record,
) -> Result<(), RecordError> {
    // SIMD validation (several times std's speed on long lines); `compat` reports the same
    // offset as `std::str::from_utf8` for an invalid line.
    let text = simdutf8::compat::from_utf8(line).map_err(|e| RecordError::InvalidUtf8 {
        offset: e.valid_up_to(),
    })?;
    if text.trim().is_empty() {
        return Err(RecordError::EmptyLine);
    }
    let simple =
        spec.extra_field.is_none() && spec.url_field.is_none() && spec.time_field.is_none();
    if simple && fast::parse(text, spec, record).is_some() {
        // The record is reused: what the fast path does not set is reset here.
        record.extra = None;
        record.origin = None;
        record.truncated = false;
        crate::record::finish_text(record, spec);
        return Ok(());
    }
    *record = parse_record_serde(text, spec)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::IoError;
    use crate::record::NON_NUMERIC_STRING;

    fn spec(id: Option<&str>, extra: Option<&str>) -> FieldSpec {
        FieldSpec {
            text_field: "text".into(),
            id_field: id.map(Into::into),
            extra_field: extra.map(Into::into),
            ..Default::default()
        }
    }

    fn parse(line: &str, id: Option<&str>, extra: Option<&str>) -> Result<Record, RecordError> {
        parse_record(line.as_bytes(), &spec(id, extra))
    }

    #[test]
    fn invalid_utf8_is_reported_at_the_offset_std_finds() {
        // Long lines, so that the vectorized validation's blocks and their tails are all
        // exercised; bad sequences: a lone continuation byte, a truncated 2- and 4-byte
        // character, an overlong encoding, a surrogate.
        let spec = FieldSpec {
            text_field: "text".into(),
            id_field: None,
            extra_field: None,
            ..Default::default()
        };
        let bad: [&[u8]; 5] = [
            b"\x80",
            b"\xc3",
            b"\xf0\x9f\x98",
            b"\xc0\xaf",
            b"\xed\xa0\x80",
        ];
        let mut record = Record::default();
        for prefix in (0..300).step_by(7) {
            for suffix in [0usize, 1, 15, 31, 64, 200] {
                for sequence in bad {
                    let mut line = br#"{"text": ""#.to_vec();
                    line.extend(std::iter::repeat_n(b'a', prefix));
                    line.extend_from_slice("é".as_bytes());
                    line.extend_from_slice(sequence);
                    line.extend(std::iter::repeat_n(b'b', suffix));
                    line.extend_from_slice(br#""}"#);
                    let offset = std::str::from_utf8(&line).unwrap_err().valid_up_to();
                    assert_eq!(
                        parse_record_into(&line, &spec, &mut record),
                        Err(RecordError::InvalidUtf8 { offset }),
                        "prefix {prefix}, suffix {suffix}, {sequence:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn unescapes_text_and_keeps_unicode() {
        let r = parse(
            r#"{"text": "a\"b\\c\n\u00e9\ud83d\ude00 ünï", "other": {"text": 1}}"#,
            None,
            None,
        )
        .unwrap();
        assert_eq!(r.text, "a\"b\\c\né😀 ünï");
        assert_eq!(r.id, None);
        assert_eq!(r.extra, None);
    }

    #[test]
    fn integer_ids_beyond_64_bits_keep_their_digits() {
        let id_of = |line: &str| parse(line, Some("id"), None).unwrap().id.unwrap();
        for digits in [
            "123456789012345678901234567890",
            "123456789012345678901234567891",
            "18446744073709551616",
            "-9223372036854775809",
            "-123456789012345678901234567890",
        ] {
            assert_eq!(
                id_of(&format!(r#"{{"id": {digits}, "text": "x"}}"#)),
                digits
            );
            // With the extra field (the serde path), and with id and text in either order.
            let line = format!(r#"{{"text": "x", "id": {digits}, "n": 2}}"#);
            let r = parse(&line, Some("id"), Some("n")).unwrap();
            assert_eq!(r.id.as_deref(), Some(digits));
            assert_eq!(r.extra, Some(2.0));
        }
        // Ordinary ids are unchanged: 64-bit integers, negative ones, floats in Rust's
        // shortest form, exponents as floats.
        assert_eq!(
            id_of(r#"{"id": 18446744073709551615, "text": "x"}"#),
            "18446744073709551615"
        );
        assert_eq!(id_of(r#"{"id": -42, "text": "x"}"#), "-42");
        assert_eq!(id_of(r#"{"id": 1.50, "text": "x"}"#), "1.5");
        assert_eq!(id_of(r#"{"id": 1e3, "text": "x"}"#), "1000");
        assert_eq!(id_of(r#"{"id": -0, "text": "x"}"#), "-0");
        assert_eq!(id_of(r#"{"id": "007", "text": "x"}"#), "007");
        // A big integer as the extra value is its number; as the text, a number.
        let r = parse(
            r#"{"id": 123456789012345678901234567890, "text": "x", "n": 123456789012345678901234567890}"#,
            Some("id"),
            Some("n"),
        )
        .unwrap();
        assert_eq!(r.extra, Some(1.2345678901234568e29));
        assert_eq!(
            parse(
                r#"{"text": 123456789012345678901234567890}"#,
                Some("text"),
                None
            ),
            Err(RecordError::TextNotString {
                field: "text".into(),
                found: "number"
            })
        );
    }

    /// The direct scanner against serde_json on generated lines, well-formed and not.
    #[test]
    fn fast_path_equals_serde_json() {
        let keys = [
            "\"text\"",
            "\"id\"",
            "\"other\"",
            "\"te\\u0078t\"",
            "\"\"",
            "\"i\\td\"",
        ];
        let pieces = [
            "plain",
            "\\n",
            "\\\"",
            "\\\\",
            "\\/",
            "\\b\\f\\r\\t",
            "\\u00e9",
            "\\u0000",
            "\\ud83d\\ude00",
            "\\ud83d",
            "\\udc00x",
            "\\ud83dx\\u0041",
            "\\x",
            "\\u12",
            "\t",
            "é",
            "😀",
            "\u{7f}",
            "{",
            ",",
            " ",
        ];
        let others = [
            "0",
            "7",
            "007",
            "-3",
            "-0",
            "-",
            "1.5",
            "1e3",
            "18446744073709551615",
            "18446744073709551616",
            "true",
            "false",
            "null",
            "nul",
            "truex",
            "{\"a\": 1}",
            "[1, 2]",
            "[]",
            "12abc",
            "\"unterminated",
        ];
        let spaces = ["", " ", "\t", "\r\n ", "\u{a0}"];
        let specs = [
            spec(Some("id"), None),
            spec(None, None),
            FieldSpec {
                text_field: "text".into(),
                id_field: Some("text".into()),
                extra_field: None,
                ..Default::default()
            },
        ];
        let mut state = 0x0123_4567_u64;
        let mut next = |n: usize| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((state >> 33) as usize) % n
        };
        let mut record = Record::default();
        for round in 0..20_000 {
            let mut line = String::from(spaces[next(2)]);
            line.push('{');
            for field in 0..next(4) {
                if field > 0 {
                    line.push_str([",", ", ", " ,"][next(3)]);
                }
                line.push_str(keys[next(keys.len())]);
                line.push_str([":", " : ", ":\t"][next(3)]);
                if next(2) == 0 {
                    line.push('"');
                    for _ in 0..next(6) {
                        line.push_str(pieces[next(pieces.len())]);
                    }
                    line.push('"');
                } else {
                    line.push_str(others[next(others.len())]);
                }
            }
            line.push_str(["}", " }", "", "}}", "} x", "}\t"][next(6)]);
            line.push_str(spaces[next(spaces.len())]);
            let cut = if round % 5 == 4 {
                next(line.len() + 1)
            } else {
                line.len()
            };
            let line = &line.as_bytes()[..cut];
            for spec in &specs {
                let expected = std::str::from_utf8(line)
                    .map_err(|e| RecordError::InvalidUtf8 {
                        offset: e.valid_up_to(),
                    })
                    .and_then(|text| {
                        if text.trim().is_empty() {
                            Err(RecordError::EmptyLine)
                        } else {
                            parse_record_serde(text, spec)
                        }
                    });
                let got = parse_record_into(line, spec, &mut record).map(|()| record.clone());
                assert_eq!(got, expected, "{}", String::from_utf8_lossy(line));
            }
        }
    }

    #[test]
    fn escaped_keys_are_matched() {
        let r = parse(r#"{"te\u0078t": "x"}"#, None, None).unwrap();
        assert_eq!(r.text, "x");
    }

    #[test]
    fn ids_may_be_strings_or_numbers() {
        let id = |line: &str| parse(line, Some("id"), None).unwrap().id.unwrap();
        assert_eq!(id(r#"{"id": "doc-7", "text": ""}"#), "doc-7");
        assert_eq!(
            id(r#"{"id": 18446744073709551615, "text": ""}"#),
            "18446744073709551615"
        );
        assert_eq!(id(r#"{"id": -42, "text": ""}"#), "-42");
        assert_eq!(id(r#"{"id": 1.5, "text": ""}"#), "1.5");
    }

    #[test]
    fn extra_accepts_numbers_and_numeric_strings() {
        let extra = |line: &str| parse(line, None, Some("ts")).unwrap().extra;
        assert_eq!(extra(r#"{"text": "", "ts": 3}"#), Some(3.0));
        assert_eq!(extra(r#"{"text": "", "ts": -2.5}"#), Some(-2.5));
        assert_eq!(extra(r#"{"text": "", "ts": " 17.25 "}"#), Some(17.25));
        assert_eq!(extra(r#"{"text": "", "ts": null}"#), None);
        assert_eq!(extra(r#"{"text": ""}"#), None);
    }

    #[test]
    fn a_key_can_serve_two_roles_and_last_duplicate_wins() {
        let s = FieldSpec {
            text_field: "t".into(),
            id_field: Some("t".into()),
            extra_field: None,
            ..Default::default()
        };
        let r = parse_record(br#"{"t": "first", "t": "second"}"#, &s).unwrap();
        assert_eq!(r.text, "second");
        assert_eq!(r.id.as_deref(), Some("second"));
    }

    #[test]
    fn every_error_has_a_clear_message() {
        let cases: Vec<(&[u8], RecordError, &str)> = vec![
            (
                b"{\"text\": \"a\xff\"}",
                RecordError::InvalidUtf8 { offset: 11 },
                "invalid UTF-8 at byte 11 of the line",
            ),
            (b"  \t ", RecordError::EmptyLine, "empty line"),
            (b"[1, 2]", RecordError::NotAnObject, "not a JSON object"),
            (b"\"text\"", RecordError::NotAnObject, "not a JSON object"),
            (
                br#"{"id": 1}"#,
                RecordError::MissingText("text".into()),
                r#"record has no field "text""#,
            ),
            (
                br#"{"text": 5}"#,
                RecordError::TextNotString {
                    field: "text".into(),
                    found: "number",
                },
                r#"field "text" is a number, expected a string"#,
            ),
            (
                br#"{"text": null}"#,
                RecordError::TextNotString {
                    field: "text".into(),
                    found: "null",
                },
                r#"field "text" is null, expected a string"#,
            ),
            (
                br#"{"text": ["x"]}"#,
                RecordError::TextNotString {
                    field: "text".into(),
                    found: "array",
                },
                r#"field "text" is an array, expected a string"#,
            ),
            (
                br#"{"text": "", "id": null}"#,
                RecordError::MissingId("id".into()),
                r#"record has no field "id" (or it is null)"#,
            ),
            (
                br#"{"text": "", "id": true}"#,
                RecordError::BadId {
                    field: "id".into(),
                    found: "boolean",
                },
                r#"field "id" is a boolean, expected a string or a number"#,
            ),
            (
                br#"{"text": "", "id": 1, "ts": "2024-01-01T00:00:00Z"}"#,
                RecordError::ExtraNotNumeric {
                    field: "ts".into(),
                    found: NON_NUMERIC_STRING,
                },
                r#"field "ts" is a non-numeric string, expected a number or a numeric string"#,
            ),
            (
                br#"{"text": "", "id": 1, "ts": {"a": 1}}"#,
                RecordError::ExtraNotNumeric {
                    field: "ts".into(),
                    found: "object",
                },
                r#"field "ts" is an object, expected a number or a numeric string"#,
            ),
            (
                br#"{"text": "", "id": 1, "ts": "NaN"}"#,
                RecordError::ExtraNotNumeric {
                    field: "ts".into(),
                    found: NON_NUMERIC_STRING,
                },
                r#"field "ts" is a non-numeric string, expected a number or a numeric string"#,
            ),
        ];
        let s = spec(Some("id"), Some("ts"));
        for (line, want, message) in cases {
            let got = parse_record(line, &s).unwrap_err();
            assert_eq!(got, want, "{}", String::from_utf8_lossy(line));
            assert_eq!(got.to_string(), message);
        }
    }

    #[test]
    fn malformed_json_is_reported_with_its_column() {
        for line in [
            r#"{"text": "a""#,
            r#"{"text": "a"} x"#,
            r#"[1, 2"#,
            "{'text': 1}",
        ] {
            let err = parse(line, None, None).unwrap_err();
            let RecordError::MalformedJson(msg) = &err else {
                panic!("{line}: {err:?}");
            };
            assert!(msg.contains("column"), "{msg}");
            assert!(err.to_string().starts_with("malformed JSON: "));
        }
    }

    #[test]
    fn record_errors_wrap_with_file_and_line() {
        let err = IoError::record("in/a.jsonl", 12, RecordError::EmptyLine);
        assert_eq!(err.to_string(), "in/a.jsonl:12: empty line");
    }
}
