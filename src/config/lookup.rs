//! The readers every table of environment variables shares: a comma-separated list
//! and a number that must lie in a range.

use std::str::FromStr;

/// A comma-separated list (device names, filters), trimmed, empty entries dropped.
pub fn comma_list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(str::to_string)
        .collect()
}

/// The variable `name`'s `value` as a number in `lo..=hi`: `None` when unset, and when
/// out of range or malformed, after a warning.
pub fn number_in_range<T: FromStr + PartialOrd>(
    value: Option<&str>,
    name: &str,
    lo: T,
    hi: T,
) -> Option<T> {
    match value?.trim().parse::<T>() {
        Ok(v) if (lo..=hi).contains(&v) => Some(v),
        _ => {
            log::warn!("ignoring out-of-range or malformed {name}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comma_list_trims_and_drops_empty_entries() {
        assert_eq!(comma_list(" mlx5_0, ,mlx5_1,"), vec!["mlx5_0", "mlx5_1"]);
        assert!(comma_list("").is_empty());
    }

    #[test]
    fn numbers_outside_the_range_or_malformed_are_none() {
        assert_eq!(number_in_range(Some(" 7 "), "X", 1, 10), Some(7));
        assert_eq!(number_in_range(Some("11"), "X", 1, 10), None);
        assert_eq!(number_in_range(Some("seven"), "X", 1, 10), None);
        assert_eq!(number_in_range(Some("-1"), "X", 0u64, 10), None);
        assert_eq!(number_in_range::<i64>(None, "X", 1, 10), None);
    }
}
