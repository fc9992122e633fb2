//! The conditions of a `PUT` or `DELETE`: `If-Match` and `If-None-Match` over entity
//! tags `"<version>"` ([`Tags`], [`Preconditions`]).

/// The entity tags of one `If-Match` or `If-None-Match` condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tags {
    /// `*`: any current version.
    Any,
    /// These versions (`"<n>"` each); weak and malformed tags are left out, since they
    /// never match under the strong comparison these conditions use.
    Versions(Vec<u64>),
}

impl Tags {
    /// Parses a field value: `*`, or a comma-separated list of entity tags.
    pub fn parse(value: &str) -> Tags {
        let mut versions = Vec::new();
        for tag in value.split(',').map(str::trim) {
            if tag == "*" {
                return Tags::Any;
            }
            let digits = tag.strip_prefix('"').and_then(|t| t.strip_suffix('"'));
            let version = digits
                .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|d| d.parse::<u64>().ok());
            versions.extend(version);
        }
        Tags::Versions(versions)
    }

    /// Whether a key at `current` (`None`: absent) matches.
    pub fn matches(&self, current: Option<u64>) -> bool {
        match self {
            Tags::Any => current.is_some(),
            Tags::Versions(versions) => current.is_some_and(|c| versions.contains(&c)),
        }
    }
}

/// The preconditions of a `PUT` or `DELETE` (RFC 9110 §13.1.1-2, over the versions).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preconditions {
    /// `If-Match`: the key must exist at one of these.
    pub if_match: Option<Tags>,
    /// `If-None-Match`: the key must not exist at one of these (`*`: must not exist).
    pub if_none_match: Option<Tags>,
}

impl Preconditions {
    /// Reads `If-Match` and `If-None-Match` from request header fields (names in any
    /// case; a field sent twice counts as one list).
    pub fn from_headers(headers: &[(String, String)]) -> Preconditions {
        let field = |name: &str| {
            let values: Vec<&str> = headers
                .iter()
                .filter(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
                .collect();
            (!values.is_empty()).then(|| Tags::parse(&values.join(",")))
        };
        Preconditions {
            if_match: field("if-match"),
            if_none_match: field("if-none-match"),
        }
    }

    /// Whether they hold for a key at `current` (`None`: absent).
    pub fn hold(&self, current: Option<u64>) -> bool {
        let matched = self.if_match.as_ref().map_or(true, |t| t.matches(current));
        let none_matched = self
            .if_none_match
            .as_ref()
            .map_or(true, |t| !t.matches(current));
        matched && none_matched
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn tags_parse_strictly() {
        assert_eq!(Tags::parse("*"), Tags::Any);
        assert_eq!(Tags::parse(" \"1\", *"), Tags::Any);
        assert_eq!(
            Tags::parse("\"12\",W/\"3\", \"x\", \"\", 4"),
            Tags::Versions(vec![12])
        );
        assert_eq!(
            Tags::parse("\"99999999999999999999999\""),
            Tags::Versions(vec![])
        );
        assert!(!Tags::Any.matches(None));
        let pre = Preconditions::from_headers(&h(&[("If-Match", "\"1\""), ("IF-MATCH", "\"2\"")]));
        assert_eq!(pre.if_match, Some(Tags::Versions(vec![1, 2])));
        assert!(pre.hold(Some(2)) && !pre.hold(Some(3)) && !pre.hold(None));
        assert!(Preconditions::default().hold(None));
    }
}
