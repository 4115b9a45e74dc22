//! The keep policy: which document of a cluster stays in the deduplicated corpus.
//!
//! Every policy but one ranks each document by itself (its bytes, a column, its capture
//! time) when it is fingerprinted, and worker 0 keeps the smallest `(rank, doc_id)` of each
//! cluster. `canonical-host[:POLICY]` also needs the mirror groups, which are known only
//! after clustering: the document's rank is its inner policy's, and a document on a
//! *mirroring host* (in a mirror group of `hosts/`, not its canonical host) is moved after
//! every other copy once the groups are known (`stages/clusters.rs`,
//! `prefer_canonical_hosts`).

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
    /// The most recently fetched (`fetched_at`: archives, `--time-field`).
    Newest,
    /// The earliest fetched.
    Oldest,
    /// A copy on the canonical host of its mirror group, or on a host in no group, before
    /// any copy on a mirroring host; among those, the inner policy decides.
    CanonicalHost(Box<KeepPolicy>),
}

/// The name of the canonical-host policy on the command line.
pub const CANONICAL_HOST: &str = "canonical-host";

impl KeepPolicy {
    /// Parses `first`, `longest`, `shortest`, `newest`, `oldest`, `max:COLUMN`, `min:COLUMN`
    /// and `canonical-host:POLICY` (any of the others). A bare `canonical-host` takes
    /// `default` as its inner policy.
    pub fn parse_with_default(text: &str, default: &str) -> Option<KeepPolicy> {
        if text == CANONICAL_HOST {
            return Self::parse_with_default(&format!("{CANONICAL_HOST}:{default}"), default);
        }
        if let Some(inner) = text.strip_prefix(CANONICAL_HOST) {
            let inner = inner.strip_prefix(':')?;
            return match Self::parse(inner)? {
                KeepPolicy::CanonicalHost(_) => None,
                inner => Some(KeepPolicy::CanonicalHost(Box::new(inner))),
            };
        }
        Self::parse(text)
    }

    /// Parses a policy as [`KeepPolicy::parse_with_default`] does, with `first` the inner
    /// policy of a bare `canonical-host`.
    pub fn parse(text: &str) -> Option<KeepPolicy> {
        match text {
            "first" => Some(KeepPolicy::First),
            "longest" => Some(KeepPolicy::Longest),
            "shortest" => Some(KeepPolicy::Shortest),
            "newest" => Some(KeepPolicy::Newest),
            "oldest" => Some(KeepPolicy::Oldest),
            _ if text.starts_with(CANONICAL_HOST) => Self::parse_with_default(text, "first"),
            _ => match text.split_once(':') {
                Some(("max", col)) if !col.is_empty() => Some(KeepPolicy::Max(col.into())),
                Some(("min", col)) if !col.is_empty() => Some(KeepPolicy::Min(col.into())),
                _ => None,
            },
        }
    }

    /// The policy that ranks each document by itself: the inner one of `canonical-host`.
    pub fn inner(&self) -> &KeepPolicy {
        match self {
            KeepPolicy::CanonicalHost(inner) => inner,
            other => other,
        }
    }

    /// True for `canonical-host`: the kept documents are chosen again once the mirror
    /// groups are known.
    pub fn prefers_canonical_hosts(&self) -> bool {
        matches!(self, KeepPolicy::CanonicalHost(_))
    }

    /// The input column the policy reads, if any.
    pub fn column(&self) -> Option<&str> {
        match self.inner() {
            KeepPolicy::Max(c) | KeepPolicy::Min(c) => Some(c),
            _ => None,
        }
    }

    /// The document's rank: the kept document of a cluster has the smallest `(rank, doc_id)`.
    /// For `canonical-host`, the inner policy's rank (the host counts later).
    pub fn rank(&self, bytes: u64, value: Option<f64>, fetched_at: Option<i64>) -> u64 {
        match self.inner() {
            // i64 order as u64 order: flip the sign bit. Missing times rank last.
            KeepPolicy::Newest => fetched_at.map_or(u64::MAX, |t| {
                (u64::MAX - ((t as u64) ^ (1 << 63))).min(u64::MAX - 1)
            }),
            KeepPolicy::Oldest => {
                fetched_at.map_or(u64::MAX, |t| ((t as u64) ^ (1 << 63)).min(u64::MAX - 1))
            }
            KeepPolicy::First => 0,
            KeepPolicy::Longest => u64::MAX - bytes,
            KeepPolicy::Shortest => bytes,
            // A document without the value ranks last.
            KeepPolicy::Max(_) => value.map_or(u64::MAX, |v| u64::MAX - ordered_bits(v)),
            KeepPolicy::Min(_) => value.map_or(u64::MAX, ordered_bits),
            KeepPolicy::CanonicalHost(_) => unreachable!("inner() is never canonical-host"),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            KeepPolicy::First => "first".into(),
            KeepPolicy::Longest => "longest".into(),
            KeepPolicy::Shortest => "shortest".into(),
            KeepPolicy::Max(c) => format!("max:{c}"),
            KeepPolicy::Min(c) => format!("min:{c}"),
            KeepPolicy::Newest => "newest".into(),
            KeepPolicy::Oldest => "oldest".into(),
            KeepPolicy::CanonicalHost(inner) => format!("{CANONICAL_HOST}:{}", inner.describe()),
        }
    }

    /// True if the policy ranks by a value this document lacks (it then ranks last).
    pub fn missing(&self, value: Option<f64>, fetched_at: Option<i64>) -> bool {
        match self.inner() {
            KeepPolicy::Max(_) | KeepPolicy::Min(_) => value.is_none(),
            KeepPolicy::Newest | KeepPolicy::Oldest => fetched_at.is_none(),
            _ => false,
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
    fn canonical_host_wraps_an_inner_policy() {
        let wrapped = |inner| Some(KeepPolicy::CanonicalHost(Box::new(inner)));
        assert_eq!(
            KeepPolicy::parse_with_default("canonical-host", "newest"),
            wrapped(KeepPolicy::Newest)
        );
        assert_eq!(
            KeepPolicy::parse_with_default("canonical-host", "first"),
            wrapped(KeepPolicy::First)
        );
        assert_eq!(
            KeepPolicy::parse_with_default("canonical-host:longest", "newest"),
            wrapped(KeepPolicy::Longest)
        );
        let column = KeepPolicy::parse("canonical-host:max:score").unwrap();
        assert_eq!(column, wrapped(KeepPolicy::Max("score".into())).unwrap());
        assert_eq!(column.column(), Some("score"));
        assert_eq!(column.describe(), "canonical-host:max:score");
        assert_eq!(
            column.rank(0, Some(2.0), None),
            KeepPolicy::Max("score".into()).rank(0, Some(2.0), None)
        );
        assert!(column.missing(None, None));
        assert!(column.prefers_canonical_hosts());
        assert!(!KeepPolicy::First.prefers_canonical_hosts());
        for bad in [
            "canonical-host:",
            "canonical-host:biggest",
            "canonical-host:canonical-host",
            "canonical-hosts",
        ] {
            assert_eq!(KeepPolicy::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn ranks_order_as_the_policy_says() {
        assert!(
            KeepPolicy::Longest.rank(100, None, None) < KeepPolicy::Longest.rank(10, None, None)
        );
        assert!(
            KeepPolicy::Shortest.rank(10, None, None) < KeepPolicy::Shortest.rank(100, None, None)
        );
        let max = KeepPolicy::Max("s".into());
        let values = [-1e300, -2.5, -0.0, 0.0, 1e-9, 3.0, 1e300];
        for w in values.windows(2) {
            assert!(
                max.rank(0, Some(w[1]), None) <= max.rank(0, Some(w[0]), None),
                "{w:?}"
            );
            let min = KeepPolicy::Min("s".into());
            assert!(
                min.rank(0, Some(w[0]), None) <= min.rank(0, Some(w[1]), None),
                "{w:?}"
            );
        }
        assert_eq!(
            max.rank(0, None, None),
            u64::MAX,
            "missing values rank last"
        );
        assert!(max.rank(0, Some(f64::NAN), None) < u64::MAX);
        // Times: newest first, or oldest first, across the epoch; missing times last.
        let times = [i64::MIN, -5, 0, 1_600_000_000_000_000, i64::MAX];
        for w in times.windows(2) {
            let newest = |t| KeepPolicy::Newest.rank(0, None, Some(t));
            let oldest = |t| KeepPolicy::Oldest.rank(0, None, Some(t));
            assert!(newest(w[1]) < newest(w[0]) || w[1] == i64::MAX, "{w:?}");
            assert!(oldest(w[0]) < oldest(w[1]) || w[1] == i64::MAX, "{w:?}");
            assert!(newest(w[1]) < u64::MAX && oldest(w[0]) < u64::MAX);
        }
        assert_eq!(KeepPolicy::Newest.rank(0, None, None), u64::MAX);
        assert_eq!(KeepPolicy::parse("newest"), Some(KeepPolicy::Newest));
    }
}
