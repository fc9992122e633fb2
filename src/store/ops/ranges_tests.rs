//! Ranged reads between two clients of an in-process master (P2PHANDSHAKE, real
//! TCP transfers for the remote side).

use crate::master::{MasterConfig, MasterService};
use crate::store::ops::tests::{client, on};
use crate::store::vocab::map_ranged;
use crate::store::{ErrorCode, Range, RangedRead, StoreError};

fn range(dst: u64, src: u64, len: u64) -> Range {
    Range { dst, src, len }
}

fn read(buffer: &[u8], keys: &[(&str, Vec<Range>)]) -> RangedRead {
    RangedRead {
        buffer: buffer.as_ptr() as u64,
        keys: keys
            .iter()
            .map(|(k, r)| (k.to_string(), r.clone()))
            .collect(),
    }
}

#[test]
fn ranges_from_remote_and_own_objects_into_registered_buffers() {
    let m = MasterService::new(MasterConfig::default());
    let (a, b) = (client(&m), client(&m));
    let one: Vec<u8> = (0..64u8).collect();
    let two: Vec<u8> = (100..164u8).collect();
    a.put("one", &one, &on(b.hostname())).unwrap();
    a.put("two", &two, &on(a.hostname())).unwrap();
    let (mut x, mut y) = (vec![0u8; 32], vec![0u8; 32]);
    a.register_buffer(x.as_mut_ptr(), x.len()).unwrap();
    a.register_buffer(y.as_mut_ptr(), 16).unwrap();
    let reads = [
        read(
            &x,
            &[
                ("one", vec![range(0, 1, 4), range(20, 30, 3)]),
                ("two", vec![range(8, 2, 5)]),
            ],
        ),
        // y is registered for 16 bytes only; the read from its middle has 8.
        read(
            &y[8..],
            &[(
                "one",
                vec![range(0, 60, 4), range(4, 0, 5), range(0, 61, 4)],
            )],
        ),
        read(&y[16..], &[("two", vec![range(0, 0, 1)])]),
        read(
            &x,
            &[
                ("none", vec![range(0, 0, 1)]),
                ("two", vec![range(32, 64, 0)]),
            ],
        ),
    ];
    // SAFETY: x and y are registered, alive and not otherwise used during the call.
    let r = unsafe { a.get_into_ranges_raw(&reads) };
    let outside =
        |f: &Result<u64, StoreError>| f.as_ref().is_err_and(|e| e.cause.contains("outside"));
    assert!(r[1][0].iter().any(outside), "{r:?}");
    let r = map_ranged(r, |e| e.code);
    let invalid = Err(ErrorCode::INVALID_PARAMS);
    assert_eq!(
        r,
        vec![
            vec![vec![Ok(4), Ok(3)], vec![Ok(5)]],
            vec![vec![Ok(4), invalid, invalid]],
            vec![vec![invalid]],
            vec![vec![Err(ErrorCode::OBJECT_NOT_FOUND)], vec![Ok(0)]],
        ]
    );
    assert_eq!(&x[..4], &one[1..5]);
    assert_eq!(&x[8..13], &two[2..7]);
    assert_eq!(&x[20..23], &one[30..33]);
    assert_eq!(&y[8..12], &one[60..64]);
    // A closed client fails every fragment with -600, in the same shape.
    b.close();
    // SAFETY: as above.
    let r = map_ranged(unsafe { b.get_into_ranges_raw(&reads[..1]) }, |e| e.code);
    assert_eq!(r, vec![vec![vec![invalid, invalid], vec![invalid]]]);
}
