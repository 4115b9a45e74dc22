//! Writing a JSONL file back: the kept lines unchanged, in the input's compression, and
//! with `--strike`, lines whose text field is rewritten with every other member as it was.

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;

use super::super::{Kept, Strikes};
use super::parse::parse_record;
use super::pieces::numbered_by_offset;
use crate::error::IoError;
use crate::file::InputFile;
use crate::record::FieldSpec;
use crate::stream::LineReader;

fn write_err(path: &Path) -> impl Fn(std::io::Error) -> IoError + '_ {
    move |source| IoError::Write {
        path: path.to_path_buf(),
        cause: source,
    }
}

/// The kept lines, unchanged, in the input's compression; blank lines are not records and
/// are left out. With `strike`, the lines with ranges get their text field rewritten
/// ([`strike_line`]).
pub(super) fn write_jsonl(
    file: &InputFile,
    removed: &HashSet<u64>,
    strike: Option<(&Strikes, &FieldSpec)>,
    tmp: &Path,
) -> Result<Kept, IoError> {
    let mut out = super::super::create_compressed(tmp, file.compression)?;
    let mut reader = if numbered_by_offset(file) {
        LineReader::open_bytes(file, 0, u64::MAX)?
    } else {
        LineReader::open(file)?
    };
    let mut line = Vec::new();
    let mut kept = Kept::default();
    while let Some(number) = reader.next_line(&mut line)? {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if removed.contains(&(number - 1)) {
            kept.removed += 1;
            continue;
        }
        let ranges = strike.and_then(|(strikes, fields)| {
            strikes
                .get(&(number - 1))
                .map(|ranges| (ranges.as_slice(), fields))
        });
        if let Some((ranges, fields)) = ranges {
            let struck = strike_line(&line, ranges, fields).map_err(|reason| IoError::Strike {
                path: file.path.clone(),
                record: format!("line {number}"),
                reason,
            })?;
            line = struck;
        }
        out.write_all(&line)
            .and_then(|_| out.write_all(b"\n"))
            .map_err(write_err(tmp))?;
        kept.kept += 1;
    }
    out.flush().map_err(write_err(tmp))?;
    drop(out);
    Ok(kept)
}

/// A JSON object's members as written: each key with its raw value, in order.
struct RawObject<'a>(Vec<(String, &'a serde_json::value::RawValue)>);

impl<'de> serde::Deserialize<'de> for RawObject<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> serde::de::Visitor<'de> for Members {
            type Value = RawObject<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    members.push((key, map.next_value()?));
                }
                Ok(RawObject(members))
            }
        }
        d.deserialize_map(Members)
    }
}

/// One JSONL line with `ranges` struck from its text field: the text is read back as a run
/// reads it (`fields`), the ranges are checked against it, and the line is written again
/// with the text field replaced and every other member's value as it was (keys are written
/// again with JSON's standard escaping).
fn strike_line(line: &[u8], ranges: &[(u64, u64)], fields: &FieldSpec) -> Result<Vec<u8>, String> {
    let record = parse_record(line, fields).map_err(|e| e.to_string())?;
    let struck = super::super::strike_text(&record.text, ranges)?;
    let object: RawObject = serde_json::from_slice(line).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(line.len());
    out.push(b'{');
    for (i, (key, value)) in object.0.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, key).map_err(|e| e.to_string())?;
        out.push(b':');
        if *key == fields.text_field {
            serde_json::to_writer(&mut out, &struck).map_err(|e| e.to_string())?;
        } else {
            out.extend_from_slice(value.get().as_bytes());
        }
    }
    out.push(b'}');
    Ok(out)
}
