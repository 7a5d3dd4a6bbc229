//! The bounded envelope decoder (spec 6.4) over arbitrary bytes: no input may panic, and an envelope
//! that decodes must decode again from its own wire bytes.
#![no_main]

use aip_core::{Limits, decode_envelope};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limits = Limits::default();
    if let Ok(env) = decode_envelope(data, &limits) {
        let wire = env.to_json_vec();
        assert!(
            decode_envelope(&wire, &limits).is_ok(),
            "re-encoded envelope must decode"
        );
    }
});
