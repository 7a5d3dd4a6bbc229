//! Bounded decode of arbitrary bytes, then every artifact decoder over the same bytes: no input may
//! panic, and a successful decode must re-encode to a fixed point.
#![no_main]

use abp::json::{DecodeBounds, decode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let bounds = DecodeBounds::MAX;
    if let Ok(v) = decode(data, &bounds) {
        let once = abp::jcs::encode(&v);
        let again = decode(&once, &bounds).map(|w| abp::jcs::encode(&w));
        assert_eq!(again.as_deref(), Ok(once.as_slice()), "canonical bytes must be a fixed point");
        let _ = abp::portability::scan(&v, &[]);
        let _ = abp::extension::negotiate(&v, &abp::extension::Support::current());
        let _ = abp::schema::compile(&v).map(|s| s.validate(&v));
        let _ = abp::signature::Entry::parse(&v);
        let _ = abp::federation::Envelope::from_value(&v);
    }
    let _ = abp::blueprint::Blueprint::decode(data, &bounds);
    let _ = abp::deployment::Deployment::decode(data, &bounds);
    let _ = abp::federation::Envelope::decode(data, &bounds);
});
