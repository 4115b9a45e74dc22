//! What a table is and what made it: the key-value metadata every part carries ("Table
//! metadata" in the [module docs](super)), written from a [`TableMeta`] and read back as a
//! [`TableTag`], and the checks that refuse a table of another kind or origin.

use std::path::Path;

use parquet::file::metadata::KeyValue;
use serde_json::Value;

use crate::error::IoError;

/// The layout and meaning of neardup's tables, written into every part as `neardup.format`.
/// Bumped whenever a column changes its meaning or type (the numbering of documents, what
/// `simhash` holds, ...): a reader refuses every format but its own rather than misread one.
pub const TABLE_FORMAT: u32 = 1;

/// The metadata keys (see the module docs, "Table metadata").
pub const KEY_FORMAT: &str = "neardup.format";
pub const KEY_VERSION: &str = "neardup.version";
pub const KEY_TABLE: &str = "neardup.table";
pub const KEY_SCHEME: &str = "neardup.scheme";
pub const KEY_PARAMS: &str = "neardup.params";

/// The parts of `neardup.params`: what defines a fingerprint, and how a search used them.
pub const PARAM_FINGERPRINT: &str = "fingerprint";
pub const PARAM_SEARCH: &str = "search";
/// `fingerprint.method`: `simhash` or `minhash` (what the `simhash` column holds).
pub const PARAM_METHOD: &str = "method";

/// The scheme recorded for a table of documents, which holds no fingerprints
/// (`neardup extract`).
pub const NO_SCHEME: &str = "none";
/// The parameters of `neardup extract`: how records became text.
pub const PARAM_EXTRACT: &str = "extract";

/// The scheme recorded for a search over fingerprints that carry no metadata.
pub const UNKNOWN_SCHEME: &str = "unknown";

/// The neardup version that writes tables (the workspace's one version).
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// What made a table: the fingerprint scheme and the parameters (a JSON object, see the
/// module docs). Every [`PartWriter`](super::PartWriter) is given one.
#[derive(Debug, Clone, PartialEq)]
pub struct TableMeta {
    pub scheme: String,
    pub params: Value,
}

impl TableMeta {
    /// The key-value metadata of a part of table `table`.
    pub(super) fn key_values(&self, table: &str) -> Vec<KeyValue> {
        [
            (KEY_FORMAT, TABLE_FORMAT.to_string()),
            (KEY_VERSION, VERSION.to_string()),
            (KEY_TABLE, table.to_string()),
            (KEY_SCHEME, self.scheme.clone()),
            (KEY_PARAMS, self.params.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| KeyValue::new(k.to_string(), v))
        .collect()
    }
}

/// The metadata of the tests' tables: simhash-doc fingerprints, searched at k = 3.
#[cfg(test)]
pub(crate) fn test_meta() -> TableMeta {
    TableMeta {
        scheme: "simhash-doc".into(),
        params: serde_json::json!({
            PARAM_FINGERPRINT: {PARAM_METHOD: "simhash", "features": "words"},
            PARAM_SEARCH: {"k": 3},
        }),
    }
}

/// A neardup table's metadata, as read back from a file.
#[derive(Debug, Clone, PartialEq)]
pub struct TableTag {
    /// Which table: `fingerprints`, `pairs`, `clusters`, `removed`.
    pub table: String,
    /// The neardup version that wrote it.
    pub version: String,
    pub meta: TableMeta,
}

impl TableTag {
    /// The tag in a file's key-value metadata: `None` when it has no `neardup.` key (a table
    /// another tool wrote). A table of another [`TABLE_FORMAT`], or with some of the keys
    /// missing or unreadable, is an error naming the file.
    pub fn from_key_values(
        path: &Path,
        key_values: Option<&Vec<KeyValue>>,
    ) -> Result<Option<TableTag>, IoError> {
        let get = |key: &str| {
            key_values
                .into_iter()
                .flatten()
                .find(|kv| kv.key == key)
                .and_then(|kv| kv.value.clone())
        };
        let tagged = key_values
            .into_iter()
            .flatten()
            .any(|kv| kv.key.starts_with("neardup."));
        if !tagged {
            return Ok(None);
        }
        let damaged = |reason: String| IoError::BadTableMeta {
            path: path.to_path_buf(),
            reason,
        };
        let required = |key: &str| get(key).ok_or_else(|| damaged(format!("no {key}")));
        let format = required(KEY_FORMAT)?;
        let version = get(KEY_VERSION).unwrap_or_else(|| "unknown".to_string());
        if format != TABLE_FORMAT.to_string() {
            return Err(IoError::TableFormat {
                path: path.to_path_buf(),
                found: format,
                version,
                reads: TABLE_FORMAT,
            });
        }
        let table = required(KEY_TABLE)?;
        let scheme = required(KEY_SCHEME)?;
        let params_text = required(KEY_PARAMS)?;
        let params: Value = serde_json::from_str(&params_text)
            .map_err(|e| damaged(format!("{KEY_PARAMS} is not JSON: {e}")))?;
        if !params.is_object() {
            return Err(damaged(format!("{KEY_PARAMS} is not a JSON object")));
        }
        Ok(Some(TableTag {
            table,
            version,
            meta: TableMeta { scheme, params },
        }))
    }

    /// Reads the tag from the footer of the Parquet file at `path`.
    pub fn of_file(path: &Path) -> Result<Option<TableTag>, IoError> {
        let file = crate::store::ObjectBytes::open(path)?;
        let reader = parquet::file::serialized_reader::SerializedFileReader::new(file).map_err(
            |source| IoError::Parquet {
                path: path.to_path_buf(),
                cause: source,
            },
        )?;
        use parquet::file::reader::FileReader;
        Self::from_key_values(path, reader.metadata().file_metadata().key_value_metadata())
    }

    /// Refuses a tag of another table than `expected` (a `pairs/` part read as clusters).
    pub fn expect_table(&self, path: &Path, expected: &'static str) -> Result<(), IoError> {
        if self.table == expected {
            return Ok(());
        }
        Err(IoError::WrongTable {
            path: path.to_path_buf(),
            found: self.table.clone(),
            expected,
        })
    }

    /// Refuses a table made differently from `other` (the tag of `other_path`): another
    /// scheme, or other parameters under `part` of `neardup.params` (`"fingerprint"`, or
    /// `None` for all of them). Tables that are read together must agree.
    pub fn expect_same_origin(
        &self,
        path: &Path,
        other: &TableTag,
        other_path: &Path,
        part: Option<&str>,
    ) -> Result<(), IoError> {
        if self.meta.scheme != other.meta.scheme {
            return Err(IoError::WrongScheme {
                path: path.to_path_buf(),
                found: self.meta.scheme.clone(),
                expected: other.meta.scheme.clone(),
                why: format!(
                    "as in {}: tables made by different schemes cannot be used together",
                    other_path.display()
                ),
            });
        }
        let pick = |tag: &TableTag| match part {
            Some(key) => tag.meta.params.get(key).cloned().unwrap_or(Value::Null),
            None => tag.meta.params.clone(),
        };
        let differences = differences(&pick(self), &pick(other));
        if differences.is_empty() {
            return Ok(());
        }
        Err(IoError::WrongParams {
            path: path.to_path_buf(),
            other: other_path.to_path_buf(),
            differences,
        })
    }
}

/// The parameters that differ between two `neardup.params` values, as `name (a vs b)`,
/// nested names joined by dots.
fn differences(a: &Value, b: &Value) -> Vec<String> {
    fn walk(prefix: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
                keys.sort();
                keys.dedup();
                for key in keys {
                    let name = if prefix.is_empty() {
                        key.clone()
                    } else {
                        format!("{prefix}.{key}")
                    };
                    let (va, vb) = (
                        x.get(key).unwrap_or(&Value::Null),
                        y.get(key).unwrap_or(&Value::Null),
                    );
                    walk(&name, va, vb, out);
                }
            }
            _ if a != b => out.push(format!("{prefix} ({a} vs {b})")),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk("", a, b, &mut out);
    out
}
