//! The general path: serde_json over the whole line, walking the object once, keeping the
//! wanted keys and skipping every other value without building it
//! ([`serde::de::IgnoredAny`]). Every line the fast scanner does not take, and every line
//! with an error, is read here, so the error messages are written in one place.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::record::{parse_number, FieldSpec, Record, RecordError, NON_NUMERIC_STRING};

/// The general path of [`parse_record_into`](super::parse_record_into): serde_json over the whole line.
pub(super) fn parse_record_serde(text: &str, spec: &FieldSpec) -> Result<Record, RecordError> {
    let malformed = |e: serde_json::Error| RecordError::MalformedJson(e.to_string());
    let mut de = serde_json::Deserializer::from_str(text);
    let slots = RecordSeed(spec)
        .deserialize(&mut de)
        .map_err(malformed)?
        .ok_or(RecordError::NotAnObject)?;
    de.end().map_err(malformed)?;
    slots.into_record(spec)
}

/// A JSON value reduced to what we need to know about it.
#[derive(Debug, Clone, PartialEq)]
enum Scalar {
    Str(String),
    U64(u64),
    I64(i64),
    F64(f64),
    /// An integer beyond 64 bits, as written (an id field's value only: see
    /// [`id_scalar`]).
    BigInt(String),
    Bool,
    Null,
    Array,
    Object,
}

impl Scalar {
    fn kind(&self) -> &'static str {
        match self {
            Scalar::Str(_) => "string",
            Scalar::U64(_) | Scalar::I64(_) | Scalar::F64(_) | Scalar::BigInt(_) => "number",
            Scalar::Bool => "boolean",
            Scalar::Null => "null",
            Scalar::Array => "array",
            Scalar::Object => "object",
        }
    }
}

impl<'de> de::Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ScalarVisitor)
    }
}

struct ScalarVisitor;

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = Scalar;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E>(self, v: &str) -> Result<Scalar, E> {
        Ok(Scalar::Str(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Scalar, E> {
        Ok(Scalar::Str(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Scalar, E> {
        Ok(Scalar::U64(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Scalar, E> {
        Ok(Scalar::I64(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Scalar, E> {
        Ok(Scalar::F64(v))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Scalar, E> {
        Ok(Scalar::Bool)
    }
    fn visit_unit<E>(self) -> Result<Scalar, E> {
        Ok(Scalar::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Scalar, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Scalar::Array)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scalar, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Scalar::Object)
    }
}

/// Which of the wanted fields a key is (a key may be several at once).
#[derive(Clone, Copy, Default)]
struct Roles {
    text: bool,
    id: bool,
    extra: bool,
    url: bool,
    time: bool,
}

impl Roles {
    fn any(self) -> bool {
        self.text || self.id || self.extra || self.url || self.time
    }
}

/// Deserializes an object key and says which wanted fields it names.
struct KeySeed<'a>(&'a FieldSpec);

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Roles;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Roles, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for KeySeed<'_> {
    type Value = Roles;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_str<E>(self, key: &str) -> Result<Roles, E> {
        let spec = self.0;
        Ok(Roles {
            text: key == spec.text_field,
            id: spec.id_field.as_deref() == Some(key),
            extra: spec.extra_field.as_deref() == Some(key),
            url: spec.url_field.as_deref() == Some(key),
            time: spec.time_field.as_deref() == Some(key),
        })
    }
}

/// The values of the wanted fields, as found.
#[derive(Default)]
struct Slots {
    text: Option<Scalar>,
    id: Option<Scalar>,
    extra: Option<Scalar>,
    url: Option<Scalar>,
    time: Option<Scalar>,
}

/// Walks the top-level value; yields `None` if it is not an object.
struct RecordSeed<'a>(&'a FieldSpec);

impl<'de> DeserializeSeed<'de> for RecordSeed<'_> {
    type Value = Option<Slots>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<Slots>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for RecordSeed<'_> {
    type Value = Option<Slots>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<Slots>, A::Error> {
        let mut slots = Slots::default();
        while let Some(roles) = map.next_key_seed(KeySeed(self.0))? {
            if !roles.any() {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let value: Scalar = if roles.id {
                id_scalar(map.next_value()?).map_err(de::Error::custom)?
            } else {
                map.next_value()?
            };
            if roles.id {
                slots.id = Some(value.clone());
            }
            if roles.extra {
                slots.extra = Some(value.clone());
            }
            if roles.url {
                slots.url = Some(value.clone());
            }
            if roles.time {
                slots.time = Some(value.clone());
            }
            if roles.text {
                slots.text = Some(value);
            }
        }
        Ok(Some(slots))
    }
    // Every other top-level value is "not an object"; arrays must still be
    // consumed so that a malformed one is reported as malformed.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<Slots>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_str<E>(self, _: &str) -> Result<Option<Slots>, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Option<Slots>, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Option<Slots>, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Option<Slots>, E> {
        Ok(None)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Option<Slots>, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Option<Slots>, E> {
        Ok(None)
    }
}

impl Slots {
    fn into_record(self, spec: &FieldSpec) -> Result<Record, RecordError> {
        let text = match self.text {
            Some(Scalar::Str(s)) => s,
            Some(other) => {
                return Err(RecordError::TextNotString {
                    field: spec.text_field.clone(),
                    found: other.kind(),
                })
            }
            None => return Err(RecordError::MissingText(spec.text_field.clone())),
        };
        let id = match &spec.id_field {
            Some(field) => Some(id_text(field, self.id)?),
            None => None,
        };
        let extra = match &spec.extra_field {
            Some(field) => extra_number(field, self.extra)?,
            None => None,
        };
        let url = match (&spec.url_field, self.url) {
            (Some(_), None | Some(Scalar::Null)) | (None, _) => None,
            (Some(_), Some(Scalar::Str(s))) => Some(s),
            (Some(field), Some(other)) => {
                return Err(RecordError::FieldType {
                    field: field.clone(),
                    found: other.kind(),
                    expected: "a string",
                })
            }
        };
        let fetched_at = match (&spec.time_field, self.time) {
            (Some(_), None | Some(Scalar::Null)) | (None, _) => None,
            (Some(field), Some(value)) => Some(time_value(field, value)?),
        };
        let mut record = Record {
            id,
            text,
            extra,
            ..Record::default()
        };
        if url.is_some() || fetched_at.is_some() {
            record.origin = Some(Box::new(crate::record::Origin {
                url,
                fetched_at,
                ..Default::default()
            }));
        }
        crate::record::finish_text(&mut record, spec);
        Ok(record)
    }
}

/// A time field's value as microseconds since the epoch: a number is seconds, a string
/// a date ([`crate::web::parse_time_text`]).
fn time_value(field: &str, value: Scalar) -> Result<i64, RecordError> {
    let parsed = match &value {
        Scalar::U64(n) => crate::web::seconds_to_micros(*n as f64),
        Scalar::I64(n) => crate::web::seconds_to_micros(*n as f64),
        Scalar::F64(x) => crate::web::seconds_to_micros(*x),
        Scalar::Str(s) => crate::web::parse_time_text(s),
        _ => None,
    };
    parsed.ok_or_else(|| RecordError::BadTime {
        field: field.to_owned(),
        value: match value {
            Scalar::Str(s) => format!("{:?}", s.chars().take(40).collect::<String>()),
            other => with_kind(other.kind()),
        },
    })
}

fn with_kind(kind: &str) -> String {
    match kind {
        "null" => kind.to_owned(),
        k if k.starts_with(['a', 'e', 'i', 'o', 'u']) => format!("an {k}"),
        k => format!("a {k}"),
    }
}

/// An id field's value, read from its raw JSON text: integers beyond 64 bits, which serde_json
/// would round through `f64` (so that distinct ids collide), keep their digits as written.
fn id_scalar(raw: &serde_json::value::RawValue) -> Result<Scalar, serde_json::Error> {
    let value: Scalar = serde_json::from_str(raw.get())?;
    if let Scalar::F64(_) = value {
        let text = raw.get();
        let digits = text.strip_prefix('-').unwrap_or(text);
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            return Ok(Scalar::BigInt(text.to_owned()));
        }
    }
    Ok(value)
}

/// The id as text. Integers keep their digits, whatever their size; floats use Rust's
/// shortest round-trip form, so `1.50` becomes `1.5` and `1e3` becomes `1000`; ids are
/// normally strings or integers anyway.
fn id_text(field: &str, value: Option<Scalar>) -> Result<String, RecordError> {
    match value {
        Some(Scalar::Str(s)) => Ok(s),
        Some(Scalar::U64(n)) => Ok(n.to_string()),
        Some(Scalar::I64(n)) => Ok(n.to_string()),
        Some(Scalar::F64(x)) => Ok(x.to_string()),
        Some(Scalar::BigInt(digits)) => Ok(digits),
        None | Some(Scalar::Null) => Err(RecordError::MissingId(field.to_owned())),
        Some(other) => Err(RecordError::BadId {
            field: field.to_owned(),
            found: other.kind(),
        }),
    }
}

/// The extra value as a number; missing and null are `None`.
fn extra_number(field: &str, value: Option<Scalar>) -> Result<Option<f64>, RecordError> {
    let not_numeric = |found| RecordError::ExtraNotNumeric {
        field: field.to_owned(),
        found,
    };
    match value {
        None | Some(Scalar::Null) => Ok(None),
        Some(Scalar::U64(n)) => Ok(Some(n as f64)),
        Some(Scalar::I64(n)) => Ok(Some(n as f64)),
        Some(Scalar::F64(x)) => Ok(Some(x)),
        Some(Scalar::BigInt(digits)) => Ok(digits.parse().ok()),
        Some(Scalar::Str(s)) => parse_number(&s)
            .map(Some)
            .ok_or_else(|| not_numeric(NON_NUMERIC_STRING)),
        Some(other) => Err(not_numeric(other.kind())),
    }
}
