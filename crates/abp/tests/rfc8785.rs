//! RFC 8785 vectors: the Appendix B number table (embedded, from the RFC text) and, when available,
//! the cyberphone input/output files shipped in PyPI's `rfc8785==0.1.4` sdist (fetched by `.ci/run`
//! into a temp dir and named by `ABP_RFC8785_ASSETS`; never committed here).
#![allow(clippy::unwrap_used)]

use abp::jcs;
use abp::json::{DecodeBounds, Number, Value, decode};

/// RFC 8785 Appendix B: IEEE 754 bit patterns and their canonical serializations.
const APPENDIX_B: &[(u64, Option<&str>)] = &[
    (0x0000000000000000, Some("0")),
    (0x8000000000000000, Some("0")),
    (0x0000000000000001, Some("5e-324")),
    (0x8000000000000001, Some("-5e-324")),
    (0x7fefffffffffffff, Some("1.7976931348623157e+308")),
    (0xffefffffffffffff, Some("-1.7976931348623157e+308")),
    (0x4340000000000000, Some("9007199254740992")),
    (0xc340000000000000, Some("-9007199254740992")),
    (0x4430000000000000, Some("295147905179352830000")),
    (0x7fffffffffffffff, None),
    (0x7ff0000000000000, None),
    (0x44b52d02c7e14af5, Some("9.999999999999997e+22")),
    (0x44b52d02c7e14af6, Some("1e+23")),
    (0x44b52d02c7e14af7, Some("1.0000000000000001e+23")),
    (0x444b1ae4d6e2ef4e, Some("999999999999999700000")),
    (0x444b1ae4d6e2ef4f, Some("999999999999999900000")),
    (0x444b1ae4d6e2ef50, Some("1e+21")),
    (0x3eb0c6f7a0b5ed8c, Some("9.999999999999997e-7")),
    (0x3eb0c6f7a0b5ed8d, Some("0.000001")),
    (0x41b3de4355555553, Some("333333333.3333332")),
    (0x41b3de4355555554, Some("333333333.33333325")),
    (0x41b3de4355555555, Some("333333333.3333333")),
    (0x41b3de4355555556, Some("333333333.3333334")),
    (0x41b3de4355555557, Some("333333333.33333343")),
    (0xbecbf647612f3696, Some("-0.0000033333333333333333")),
    (0x43143ff3c1cb0959, Some("1424953923781206.2")),
];

#[test]
fn appendix_b_numbers_serialize_exactly_and_nan_and_infinity_are_unrepresentable() {
    for (bits, expected) in APPENDIX_B {
        let f = f64::from_bits(*bits);
        match (Number::float(f), expected) {
            (Some(n), Some(want)) => {
                let out = jcs::encode(&Value::Number(n));
                assert_eq!(String::from_utf8(out).unwrap(), *want, "{bits:016x}");
            }
            (None, None) => {}
            (got, want) => panic!("{bits:016x}: {got:?} vs {want:?}"),
        }
    }
}

#[test]
fn cyberphone_vectors_from_the_rfc8785_sdist_canonicalize_byte_exactly() {
    let Ok(dir) = std::env::var("ABP_RFC8785_ASSETS") else {
        println!("SKIP: ABP_RFC8785_ASSETS unset (.ci/run fetches rfc8785==0.1.4 and sets it)");
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    let mut checked = 0;
    for entry in std::fs::read_dir(dir.join("input")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_owned();
        let input = std::fs::read(&path).unwrap();
        let expected = std::fs::read(dir.join("output").join(&name)).unwrap();
        let value = decode(&input, &DecodeBounds::MAX).unwrap();
        assert_eq!(jcs::encode(&value), expected, "{}", path.display());
        checked += 1;
    }
    println!("cyberphone vectors checked: {checked}");
    assert!(checked >= 6);
}
