//! Canonicalization of arbitrary bytes under tightened bounds: decode with the maximum, encode under
//! a bytes ceiling taken from the input; never panics, and output is always canonical.
#![no_main]

use abp::json::{DecodeBounds, decode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&limit, rest)) = data.split_first() else { return };
    let Ok(v) = decode(rest, &DecodeBounds::MAX) else { return };
    let max_bytes = usize::from(limit) * 64 + 1;
    match abp::jcs::encode_bounded(&v, max_bytes) {
        Ok(out) => {
            assert!(out.len() <= max_bytes);
            assert!(abp::json::decode_canonical(&out, &DecodeBounds::MAX).is_ok(), "output must be canonical");
        }
        Err(e) => assert_eq!(e.code, abp::Code::Ceiling(abp::CeilingKey::Bytes)),
    }
});
