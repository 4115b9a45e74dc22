//! The keep policy: which document of a cluster stays in the deduplicated corpus.

/// Which document of a cluster is kept. Ties are broken by the smaller `doc_id`, so the
/// choice never depends on the number of workers.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum KeepPolicy {
    /// The first in input order (smallest doc_id).
    First,
    /// The longest text (most bytes).
    Longest,
    /// The shortest text.
    Shortest,
    /// The largest value of an input column (e.g. a quality score or timestamp).
    Max(String),
    /// The smallest value of an input column.
    Min(String),
}

impl KeepPolicy {
    /// Parses `first`, `longest`, `shortest`, `max:COLUMN`, `min:COLUMN`.
    pub fn parse(text: &str) -> Option<KeepPolicy> {
        match text {
            "first" => Some(KeepPolicy::First),
            "longest" => Some(KeepPolicy::Longest),
            "shortest" => Some(KeepPolicy::Shortest),
            _ => match text.split_once(':') {
                Some(("max", col)) if !col.is_empty() => Some(KeepPolicy::Max(col.into())),
                Some(("min", col)) if !col.is_empty() => Some(KeepPolicy::Min(col.into())),
                _ => None,
            },
        }
    }

    /// The input column the policy reads, if any.
    pub fn column(&self) -> Option<&str> {
        match self {
            KeepPolicy::Max(c) | KeepPolicy::Min(c) => Some(c),
            _ => None,
        }
    }

    /// The document's rank: the kept document of a cluster has the smallest `(rank, doc_id)`.
    pub fn rank(&self, bytes: u64, value: Option<f64>) -> u64 {
        match self {
            KeepPolicy::First => 0,
            KeepPolicy::Longest => u64::MAX - bytes,
            KeepPolicy::Shortest => bytes,
            // A document without the value ranks last.
            KeepPolicy::Max(_) => value.map_or(u64::MAX, |v| u64::MAX - ordered_bits(v)),
            KeepPolicy::Min(_) => value.map_or(u64::MAX, ordered_bits),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            KeepPolicy::First => "first".into(),
            KeepPolicy::Longest => "longest".into(),
            KeepPolicy::Shortest => "shortest".into(),
            KeepPolicy::Max(c) => format!("max:{c}"),
            KeepPolicy::Min(c) => format!("min:{c}"),
        }
    }
}

/// Maps an f64 to a u64 with the same order (NaN sorts last), leaving `u64::MAX` unused for
/// "no value".
fn ordered_bits(v: f64) -> u64 {
    if v.is_nan() {
        return u64::MAX - 1;
    }
    let bits = v.to_bits();
    let key = if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    };
    key.min(u64::MAX - 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_policies_parse() {
        assert_eq!(KeepPolicy::parse("first"), Some(KeepPolicy::First));
        assert_eq!(
            KeepPolicy::parse("max:score"),
            Some(KeepPolicy::Max("score".into()))
        );
        assert_eq!(KeepPolicy::parse("max:"), None);
        assert_eq!(KeepPolicy::parse("biggest"), None);
    }

    #[test]
    fn ranks_order_as_the_policy_says() {
        assert!(KeepPolicy::Longest.rank(100, None) < KeepPolicy::Longest.rank(10, None));
        assert!(KeepPolicy::Shortest.rank(10, None) < KeepPolicy::Shortest.rank(100, None));
        let max = KeepPolicy::Max("s".into());
        let values = [-1e300, -2.5, -0.0, 0.0, 1e-9, 3.0, 1e300];
        for w in values.windows(2) {
            assert!(max.rank(0, Some(w[1])) <= max.rank(0, Some(w[0])), "{w:?}");
            let min = KeepPolicy::Min("s".into());
            assert!(min.rank(0, Some(w[0])) <= min.rank(0, Some(w[1])), "{w:?}");
        }
        assert_eq!(max.rank(0, None), u64::MAX, "missing values rank last");
        assert!(max.rank(0, Some(f64::NAN)) < u64::MAX);
    }
}
