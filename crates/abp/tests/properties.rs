//! Property tests: the spec 9 laws of the bounds meet, the byte-exact round trip of unknown optional
//! extensions (spec 7), and JCS/decoder robustness.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use abp::blueprint::Blueprint;
use abp::bounds::{self, BoundSet, Cost, MARKERS, OPERATIONAL, Posture};
use abp::digest::{Digest, Domain};
use abp::extension::{self, Support};
use abp::jcs;
use abp::json::{DecodeBounds, Number, Object, Value, decode};
use proptest::prelude::*;

fn bound_set() -> impl Strategy<Value = BoundSet> {
    (
        proptest::array::uniform7(1i64..1000),
        1i64..10_000,
        (0usize..4, 0usize..4, 0usize..4, 0usize..3, 0usize..3),
        proptest::collection::btree_set(0usize..2, 0..=2),
    )
        .prop_map(|(operational, amount, p, markers)| BoundSet {
            operational,
            max_cost: Cost {
                amount,
                currency: "USD".to_owned(),
            },
            protected: [p.0, p.1, p.2, p.3, p.4],
            markers: markers
                .into_iter()
                .map(|i| MARKERS[i])
                .collect::<BTreeSet<_>>(),
        })
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-(1i64 << 53) + 1..(1i64 << 53)).prop_map(Value::int),
        any::<f64>().prop_filter_map("finite", |f| Number::float(f).map(Value::Number)),
        "\\PC{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec(
                ("[a-z\\u{e000}-\\u{e010}\\u{10000}-\\u{10010}]{1,6}", inner),
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect::<Object>())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_meet_is_idempotent_commutative_and_associative(a in bound_set(), b in bound_set(), c in bound_set()) {
        prop_assert_eq!(a.meet(&a).unwrap(), a.clone());
        prop_assert_eq!(a.meet(&b).unwrap(), b.meet(&a).unwrap());
        prop_assert_eq!(a.meet(&b).unwrap().meet(&c).unwrap(), a.meet(&b.meet(&c).unwrap()).unwrap());
    }

    #[test]
    fn effective_bounds_never_widen_host_policy(bp in bound_set(), dp in bound_set(), host in bound_set()) {
        let i = bounds::intersect(&bp, &dp, &host, Posture::Acknowledge).unwrap();
        prop_assert!(!i.effective.widens(&host));
        prop_assert!(!i.effective.widens(&dp));
    }

    #[test]
    fn a_clamp_is_recorded_iff_an_operational_bound_differs_from_the_request(bp in bound_set(), dp in bound_set(), host in bound_set()) {
        let i = bounds::intersect(&bp, &dp, &host, Posture::Acknowledge).unwrap();
        for (k, name) in OPERATIONAL.iter().enumerate() {
            let clamped = i.clamps.iter().any(|c| c.bound == *name);
            prop_assert_eq!(clamped, i.effective.operational[k] != bp.operational[k]);
        }
        prop_assert_eq!(i.clamps.iter().any(|c| c.bound == "max_cost"), i.effective.max_cost != bp.max_cost);
        let protected_changed = i.effective.protected != bp.protected || i.effective.markers != bp.markers;
        let denied = bounds::intersect(&bp, &dp, &host, Posture::Deny);
        prop_assert_eq!(denied.is_err(), protected_changed);
    }

    #[test]
    fn canonical_bytes_are_a_fixed_point_of_decode_and_encode(v in json_value()) {
        let bytes = jcs::encode(&v);
        let back = decode(&bytes, &DecodeBounds::MAX).unwrap();
        prop_assert_eq!(jcs::encode(&back), bytes);
    }

    #[test]
    fn finite_doubles_serialize_to_a_round_tripping_ecmascript_lexeme(bits in any::<u64>()) {
        let f = f64::from_bits(bits);
        if let Some(n) = Number::float(f) {
            let s = String::from_utf8(jcs::encode(&Value::Number(n))).unwrap();
            prop_assert_eq!(s.parse::<f64>().unwrap(), if f == 0.0 { 0.0 } else { f });
            let exponent_form = s.contains('e');
            let magnitude = f.abs();
            prop_assert_eq!(exponent_form, magnitude != 0.0 && !(1e-6..1e21).contains(&magnitude));
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode(&bytes, &DecodeBounds::MAX);
        let _ = Blueprint::decode(&bytes, &DecodeBounds::MAX);
    }

    #[test]
    fn unknown_optional_extensions_round_trip_byte_exactly(payload in json_value()) {
        let mut body = Object::new();
        body.insert("payload", payload);
        let bytes = blueprint_with_optional("com.example/unknown", Value::Object(body));
        let b = Blueprint::decode(&bytes, &DecodeBounds::MAX).unwrap();
        prop_assert_eq!(jcs::encode(&Value::Object(b.value().clone())), bytes.clone());
        prop_assert_eq!(b.canonical_bytes(), bytes.as_slice());
        let n = extension::negotiate(&Value::Object(b.value().clone()), &Support::current()).unwrap();
        prop_assert_eq!(n.quarantined, vec!["com.example/unknown".to_owned()]);
    }
}

/// A minimal valid Blueprint carrying one optional extension, with an honest content digest.
fn blueprint_with_optional(ns: &str, body: Value) -> Vec<u8> {
    let base = r#"{"blueprint_id":"example.demo/echo","capability_requirements":[],"ceilings":{"max_attempts":3,"max_concurrency":2,"max_cost":{"amount":1000,"currency":"USD"},"max_depth":8,"max_descendants":64,"max_elapsed_ms":60000,"max_fan_out":4,"max_tokens":100000},"classification_ceiling":"internal","effect_intents":[],"evaluation_assertions":[],"extensions":{"critical":{},"optional":{}},"input_ports":[],"output_contract":{"classification_ceiling":"internal","port":"result"},"output_ports":[{"classification_ceiling":"internal","name":"result","required":true,"schema":{"type":"object"}}],"producer":{"created_at":"2026-08-20T00:00:00Z","identity":"example.demo","toolchain":"example.demo.toolchain"},"protocol_revision":1,"release_number":1,"required_core_fields":[],"triggers":["manual"]}"#;
    let Value::Object(mut o) = decode(base.as_bytes(), &DecodeBounds::MAX).unwrap() else {
        unreachable!()
    };
    let mut optional = Object::new();
    optional.insert(ns, body);
    let mut ext = Object::new();
    ext.insert("critical", Value::Object(Object::new()));
    ext.insert("optional", Value::Object(optional));
    o.insert("extensions", Value::Object(ext));
    let digest = Digest::compute(
        Domain::BlueprintContent,
        &jcs::encode(&Value::Object(o.clone())),
    );
    o.insert("content_digest", Value::string(digest.to_tagged()));
    jcs::encode(&Value::Object(o))
}
