//! The block hash a store key stands for (upstream `ParseSeqHashFromObjectKey`,
//! `key_util.h`): a key that is a whole `0x`/`0X` hexadecimal or decimal u64 is the
//! hash; any other key has none.

/// Reads `key` as `std::stoull` does in upstream's parser, so exactly the same keys
/// parse: `0x`/`0X` + hex digits (base 16), else base 10 with `strtoull`'s leading
/// whitespace and sign (`-n` wraps to 2^64 - n); the number must run to the end of the
/// key and fit in a u64.
pub fn seq_hash(key: &str) -> Option<u64> {
    let b = key.as_bytes();
    if b.len() >= 2 && b[0] == b'0' && (b[1] == b'x' || b[1] == b'X') {
        let digits = &key[2..];
        if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        return u64::from_str_radix(digits, 16).ok();
    }
    // C's isspace in the "C" locale.
    let rest = key.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let (negative, digits) = match rest.as_bytes().first() {
        Some(b'-') => (true, &rest[1..]),
        Some(b'+') => (false, &rest[1..]),
        _ => (false, rest),
    };
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let value: u64 = digits.parse().ok()?;
    Some(if negative {
        value.wrapping_neg()
    } else {
        value
    })
}

#[cfg(test)]
mod tests {
    use super::seq_hash;

    #[test]
    fn upstream_cases() {
        assert_eq!(seq_hash("12345"), Some(12345));
        assert_eq!(seq_hash("0x2a"), Some(42));
        assert_eq!(seq_hash("0XFF"), Some(255));
        assert_eq!(seq_hash("99"), Some(99));
        assert_eq!(seq_hash(""), None);
        assert_eq!(seq_hash("not-a-hash"), None);
        assert_eq!(seq_hash("123abc"), None);
    }

    #[test]
    fn u64_range_and_stoull_edges() {
        assert_eq!(seq_hash("18446744073709551615"), Some(u64::MAX));
        assert_eq!(seq_hash("18446744073709551616"), None);
        assert_eq!(seq_hash("0xffffffffffffffff"), Some(u64::MAX));
        assert_eq!(seq_hash("0x10000000000000000"), None);
        assert_eq!(seq_hash("9223372036854775808"), Some(1 << 63));
        assert_eq!(seq_hash("0x0000000000000000001"), Some(1));
        assert_eq!(seq_hash("007"), Some(7));
        assert_eq!(seq_hash("0"), Some(0));
        // What strtoull takes besides digits.
        assert_eq!(seq_hash(" \t12"), Some(12));
        assert_eq!(seq_hash("+12"), Some(12));
        assert_eq!(seq_hash("-1"), Some(u64::MAX));
        assert_eq!(seq_hash("-0"), Some(0));
        // And what it does not.
        for key in [
            "0x", "0X", "0xg", "0x1g", "0x-1", "0x+1", " 0x1", "12 ", "1_000", "+", "-", " ",
            "+-1", "1e3", "١٢", "0x١",
        ] {
            assert_eq!(seq_hash(key), None, "{key:?}");
        }
    }
}
