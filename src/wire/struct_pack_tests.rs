//! Unit and property tests of the struct_pack codec.

use super::struct_pack::*;
use proptest::prelude::*;
use std::fmt;

fn rt<T: Pack + PartialEq + fmt::Debug + 'static>(v: T) {
    assert_eq!(deserialize::<T>(&serialize(&v)).unwrap(), v);
    assert_eq!(deserialize::<T>(&serialize_with_type_info(&v)).unwrap(), v);
}

#[test]
fn literals() {
    assert_eq!(literal::<String>(), [0x80, 0x0c]);
    assert_eq!(literal::<Result<String, i32>>(), [0x87, 0x80, 0x0c, 0x01]);
    assert_eq!(literal::<Result<(), i32>>(), [0x87, 0xfa, 0x01]);
    assert_eq!(literal::<(bool, String)>(), [0xfd, 0x0b, 0x80, 0x0c, 0xff]);
    assert_eq!(literal::<(Vec<String>,)>(), [0x84, 0x80, 0x0c]);
    assert_eq!(literal::<Map<String, u64>>(), [0x82, 0x80, 0x0c, 0x04]);
    assert_eq!(size_literal(8), 0x89);
}

#[test]
fn hashes_from_spec() {
    // ServiceReady's response, RemoveAll's response (spec §3.3).
    assert_eq!(type_hash::<Result<String, i32>>(), 0x1cb3cc34);
    assert_eq!(type_hash::<i64>(), 0x86666834);
    assert_eq!(type_hash::<Result<(), i32>>(), 0xaf2868cc);
}

#[test]
fn width_selection() {
    let small = vec![7u8; 255];
    let b = serialize(&small);
    assert_eq!(b[0] & 1, 0);
    assert_eq!(b[4], 255);
    let big = vec![7u8; 256];
    let b = serialize(&big);
    assert_eq!(b[0] & 1, 1);
    assert_eq!(b[4], 0b01000);
    assert_eq!(&b[5..7], &[0x00, 0x01]);
    rt(big);
    rt(vec![String::from("x"); 70_000]);
    rt(vec![1u64; 300]);
}

#[test]
fn rejects() {
    let b = serialize(&String::from("abc"));
    assert_eq!(
        deserialize::<String>(&b[..b.len() - 1]),
        Err(DecodeError::Truncated)
    );
    assert!(matches!(
        deserialize::<Vec<String>>(&b),
        Err(DecodeError::HashMismatch { .. })
    ));
    let mut t = b.clone();
    t.push(0);
    assert_eq!(deserialize::<String>(&t), Err(DecodeError::Trailing(1)));
    // A huge length never allocates.
    let mut h = type_hash::<Vec<u64>>() | 1;
    let mut m = h.to_le_bytes().to_vec();
    m.push(0b11000);
    m.extend_from_slice(&u64::MAX.to_le_bytes());
    assert!(deserialize::<Vec<u64>>(&m).is_err());
    h = type_hash::<Vec<()>>();
    let mut z = h.to_le_bytes().to_vec();
    z.push(0xff);
    assert!(deserialize::<Vec<()>>(&z).is_ok());
    // A wrong embedded literal.
    let mut ti = serialize_with_type_info(&String::from("x"));
    ti[6] = 0x0d;
    assert_eq!(
        deserialize::<String>(&ti),
        Err(DecodeError::TypeInfoMismatch)
    );
}

proptest! {
    #[test]
    fn roundtrip_values(
        a in any::<i64>(), b in any::<u32>(), s in ".{0,40}",
        v in proptest::collection::vec(any::<u16>(), 0..300),
        o in proptest::option::of(any::<i8>()), f in any::<bool>(),
    ) {
        rt((a, b, s.clone(), v.clone()));
        rt((o, f));
        rt((s,));
        let e: Result<Vec<u16>, i32> = if f { Ok(v) } else { Err(b as i32) };
        rt(e);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = deserialize::<(String, Vec<Option<u64>>, bool)>(&bytes);
        let _ = deserialize::<Map<String, Vec<String>>>(&bytes);
        let _ = deserialize::<Result<(), i32>>(&bytes);
        let _ = split(&bytes);
    }
}

#[test]
fn serialize_into_appends_what_serialize_returns_in_every_width() {
    let short = (String::from("key"), vec![1u64, 2, 3]);
    let wide = (String::from("k").repeat(300), vec![7u64; 3]);
    for prefix in [&b""[..], &b"header.."[..]] {
        let mut out = prefix.to_vec();
        serialize_into(&short, &mut out);
        assert_eq!(&out[..prefix.len()], prefix);
        assert_eq!(out[prefix.len()..], serialize(&short)[..]);

        let mut out = prefix.to_vec();
        serialize_into(&wide, &mut out);
        assert_eq!(&out[..prefix.len()], prefix);
        assert_eq!(out[prefix.len()..], serialize(&wide)[..]);
        assert_eq!(
            deserialize::<(String, Vec<u64>)>(&out[prefix.len()..]).unwrap(),
            wide
        );
    }
}

#[test]
fn type_hashes_agree_across_threads() {
    let here = type_hash::<(String, Vec<u64>)>();
    let there = std::thread::spawn(type_hash::<(String, Vec<u64>)>)
        .join()
        .unwrap();
    assert_eq!(here, there);
    assert_eq!(here, type_hash::<(String, Vec<u64>)>());
}
