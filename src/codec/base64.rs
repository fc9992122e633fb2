//! Standard base64 (RFC 4648, with padding), for etcd's JSON gateway, over the `base64`
//! crate's standard engine: padding required and canonical, no line breaks.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

/// Encodes `data`.
pub fn encode(data: &[u8]) -> String {
    STANDARD.encode(data)
}

/// Decodes `text`; `None` when it is not valid padded base64.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    STANDARD.decode(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc4648_vectors_round_trip() {
        for (plain, coded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(encode(plain.as_bytes()), coded);
            assert_eq!(decode(coded).unwrap(), plain.as_bytes());
        }
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(decode(&encode(&all)).unwrap(), all);
    }

    #[test]
    fn rejects_malformed_input() {
        for bad in ["Zg=", "Z===", "Zg==Zg==", "Zm9*", "Zm9v\n"] {
            assert_eq!(decode(bad), None, "{bad:?}");
        }
    }
}
