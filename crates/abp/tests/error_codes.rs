//! The closed error vocabulary (spec 12), enforced both ways: every declared code is reachable through
//! the public API, and the declared set is exactly the spec's 74 codes plus the eight ceilings.
#![allow(clippy::unwrap_used)]

mod common;

use common::{host_key, signed_envelope};

use std::collections::{BTreeMap, BTreeSet};

use abp::base64url;
use abp::blueprint::Blueprint;
use abp::bounds::{self, BoundSet, Posture};
use abp::compatibility::{self, Identity};
use abp::conformance::corpus::{Case, Expected};
use abp::conformance::{Corpus, runner};
use abp::deployment::{self, BindingContext, Deployment};
use abp::digest::{self, Digest, Domain};
use abp::error::NAMED_CODES;
use abp::extension::{self, Support};
use abp::federation::{self, CommitmentContext, Envelope, PriorReceipt};
use abp::jcs;
use abp::json::{self, DecodeBounds, Object, Value};
use abp::signature::{self, Entry};
use abp::{CeilingKey, Code, Error, portability, predicate, schema};

fn j(t: &str) -> Value {
    json::decode(t.as_bytes(), &DecodeBounds::MAX).unwrap()
}

fn obj(t: &str) -> Object {
    match j(t) {
        Value::Object(o) => o,
        _ => panic!("not an object"),
    }
}

fn err<T: std::fmt::Debug>(r: abp::Result<T>) -> Code {
    r.unwrap_err().code
}

const BLUEPRINT: &str = r#"{"blueprint_id":"acme.test/agent","capability_requirements":[{"approval_trait":"none","argument_schema":{"type":"object"},"authority_trait":"none","classification_ceiling":"internal","impact_class":"ordinary","operation_family":"acme.test.lookup","operation_kind":"read","result_schema":{"type":"object"}}],"ceilings":{"max_attempts":2,"max_concurrency":2,"max_cost":{"amount":10,"currency":"EUR"},"max_depth":2,"max_descendants":2,"max_elapsed_ms":1000,"max_fan_out":2,"max_tokens":100},"classification_ceiling":"internal","content_digest":"","effect_intents":[{"impact_class":"ordinary","logical_operation":"acme.test.write","operation_kind":"mutation"}],"evaluation_assertions":[],"extensions":{"critical":{},"optional":{}},"input_ports":[],"output_contract":{"classification_ceiling":"internal","port":"out"},"output_ports":[{"classification_ceiling":"internal","name":"out","required":true,"schema":{"type":"object"}}],"producer":{"created_at":"2026-01-01T00:00:00Z","identity":"acme.test","toolchain":"acme.toolchain"},"protocol_revision":1,"release_number":1,"required_core_fields":[],"triggers":["manual"]}"#;

const DEPLOYMENT: &str = r#"{"authority_requirement":{"adapter_identity":"acme.authority","profile_identity":"acme.profile"},"blueprint_release":{"blueprint_id":"acme.test/agent","content_digest":"","release_number":1},"build_identities":[{"digest":"sha-256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","kind":"package","name":"acme_pkg","version":"1.2.3"}],"data_bindings":[],"deployment_digest":"","effect_owner":{"adapter_identity":"acme.effects","idempotency":{"key_derivation":"host","recovery":"authoritative"}},"eligibility":{"beneficiary":{},"owner":{},"runtime_principal":{}},"evaluation_binding":{"adapter_identity":"acme.evals","corpus":{"digest":"sha-256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","name":"acme.corpus"}},"extensions":{"critical":{},"optional":{}},"host_bounds":{"approval_trait":"none","authority_trait":"none","classification_ceiling":"internal","disclosure_ceiling":"summary","effect_impact_ceiling":"ordinary","max_attempts":2,"max_concurrency":2,"max_cost":{"amount":10,"currency":"EUR"},"max_depth":2,"max_descendants":2,"max_elapsed_ms":1000,"max_fan_out":2,"max_tokens":100},"lifecycle":{"activated_at":"2026-01-01T00:00:00Z","state":"active"},"model_policy":{"allowed_model_roles":[],"max_cost":{"amount":5,"currency":"EUR"},"max_tokens":50},"protocol_revision":1,"required_core_fields":[],"scope_projection":{"adapter_identity":"acme.scope"},"signer_custody":"host_managed","tool_bindings":[{"adapter_identity":"acme.tools","attested_at":"2026-01-01T00:00:00Z","descriptor_digest":"sha-256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","logical_operation":"acme.test.lookup","schema_digest":"sha-256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},{"adapter_identity":"acme.tools","attested_at":"2026-01-01T00:00:00Z","descriptor_digest":"sha-256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","logical_operation":"acme.test.write","schema_digest":"sha-256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}]}"#;

fn blueprint(edit: impl FnOnce(&mut Object)) -> Blueprint {
    let mut o = obj(BLUEPRINT);
    edit(&mut o);
    let d = Digest::compute(
        Domain::BlueprintContent,
        &jcs::encode(&Value::Object(o.without(&["content_digest"]))),
    );
    o.insert("content_digest", Value::string(d.to_tagged()));
    Blueprint::decode(&jcs::encode(&Value::Object(o)), &DecodeBounds::MAX).unwrap()
}

fn deployment_bytes(bp: &Blueprint, edit: impl FnOnce(&mut Object)) -> Vec<u8> {
    let mut o = obj(DEPLOYMENT);
    let mut release = o
        .get("blueprint_release")
        .unwrap()
        .as_object()
        .unwrap()
        .clone();
    release.insert(
        "content_digest",
        Value::string(bp.content_digest().to_tagged()),
    );
    o.insert("blueprint_release", Value::Object(release));
    edit(&mut o);
    let d = Digest::compute(
        Domain::DeploymentContent,
        &jcs::encode(&Value::Object(o.without(&["deployment_digest"]))),
    );
    o.insert("deployment_digest", Value::string(d.to_tagged()));
    jcs::encode(&Value::Object(o))
}

fn deployment(bp: &Blueprint, edit: impl FnOnce(&mut Object)) -> Deployment {
    Deployment::decode(&deployment_bytes(bp, edit), &DecodeBounds::MAX).unwrap()
}

fn set_path(o: &mut Object, path: &[&str], v: Value) {
    if path.len() == 1 {
        o.insert(path[0], v);
        return;
    }
    let mut child = o
        .get(path[0])
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    set_path(&mut child, &path[1..], v);
    o.insert(path[0], Value::Object(child));
}

fn fed_support(schema: Option<&str>) -> Support {
    let mut s = Support::current();
    if let Some(doc) = schema {
        s.schemas.insert("com.example/federation", j(doc));
    }
    s
}

const FED_SCHEMA: &str = r#"{"additionalProperties":false,"properties":{"audience":{"type":"string"},"issuer":{"type":"string"},"subject":{"type":"string"}},"type":"object"}"#;

fn artifact(ext: &str, rev: i64, required: &str) -> Value {
    j(&format!(
        r#"{{"content_digest":"sha-256:x","extensions":{ext},"protocol_revision":{rev},"required_core_fields":{required}}}"#
    ))
}

fn bound_set_json(extra: &str) -> String {
    format!(
        r#"{{"approval_trait":"none","authority_trait":"none","classification_ceiling":"internal","disclosure_ceiling":"full","effect_impact_ceiling":"ordinary","max_concurrency":1,"max_cost":{{"amount":1,"currency":"EUR"}},"max_depth":1,"max_descendants":1,"max_elapsed_ms":1,"max_fan_out":1,"max_tokens":1{extra}}}"#
    )
}

fn bounds_of(extra: &str) -> BoundSet {
    BoundSet::from_value(
        &j(&bound_set_json(&format!(r#","max_attempts":1{extra}"#))),
        "b",
    )
    .unwrap()
}

/// A one-file synthetic corpus, sealed so that loading reaches the check under test.
fn corpus_files(
    case_file: &str,
    declared_cases: i64,
    hash_ok: bool,
    total: i64,
    applicability: Value,
) -> BTreeMap<String, Vec<u8>> {
    let path = "cases/json-decode.json";
    let hash = if hash_ok {
        base64url::encode(Digest::plain(case_file.as_bytes()).as_bytes())
    } else {
        "x".into()
    };
    let mut index = obj(&format!(
        r#"{{"files":[{{"cases":{declared_cases},"path":"{path}","sha256_base64url":"{hash}"}}],"format":"agent-blueprint-protocol-conformance-corpus-index","protocol_revision":1,"public_key_fingerprints":[],"total_cases":{total}}}"#
    ));
    index.insert("applicability", applicability);
    index.insert(
        "registry_digest",
        Value::string(extension::registry_digest().to_tagged()),
    );
    let d = Digest::compute(
        Domain::CorpusIndex,
        &jcs::encode(&Value::Object(index.clone())),
    );
    index.insert("corpus_digest", Value::string(d.to_tagged()));
    let mut files = BTreeMap::new();
    files.insert("index.json".to_owned(), jcs::encode(&Value::Object(index)));
    files.insert(path.to_owned(), case_file.as_bytes().to_vec());
    files
}

fn cases_file(cases: &str) -> String {
    format!(r#"{{"cases":[{cases}],"format":"agent-blueprint-protocol-conformance-cases"}}"#)
}

const CASE: &str = r#"{"class":"valid","expected":{"value":1,"verdict":"valid"},"id":"c1","input":{"text":"1"},"surface":"json.decode"}"#;

fn load(files: BTreeMap<String, Vec<u8>>) -> Code {
    Corpus::load(&files).unwrap_err().code
}

/// One trigger per declared code, through the public API.
fn triggers() -> Vec<(Code, Code)> {
    let bp = blueprint(|_| {});
    let dp = deployment(&bp, |_| {});
    let ctx = |edit: &dyn Fn(&mut CommitmentContext)| {
        let mut c = CommitmentContext {
            keys: vec![host_key()],
            ..CommitmentContext::default()
        };
        edit(&mut c);
        c
    };
    let env = signed_envelope(|_| {});
    let ok_ctx = ctx(&|_| {});
    assert_eq!(
        federation::verify_commitment(&env, &ok_ctx).unwrap(),
        "task-1"
    );
    let ident = |name: &str, version: &str| Identity {
        kind: "package".into(),
        name: name.into(),
        version: version.into(),
        digest: "sha-256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA".into(),
    };
    let sig_entry = |alg: &str| {
        j(&format!(
            r#"{{"protected":{{"alg":"{alg}","b64":false,"crit":["b64"],"kid":"k1"}},"signature":"{}","signed_attributes":{{"algorithm":"Ed25519","content_digest":"sha-256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","created_at":"2026-01-01T00:00:00Z","key_id":"k1","purpose":"blueprint"}}}}"#,
            base64url::encode(&[0u8; 64])
        ))
    };
    let empty_corpus = Corpus {
        cases: vec![],
        corpus_digest: Digest::plain(b""),
        files: BTreeMap::new(),
    };
    let source_missing = Case {
        id: "x".into(),
        surface: "bounds_algebra.intersect".into(),
        class: "valid".into(),
        input: obj(&format!(
            r#"{{"blueprint":{0},"deployment":{0}}}"#,
            bound_set_json(r#","max_attempts":1"#)
        )),
        expected: Expected::Invalid("bound_source_missing".into()),
    };
    let full_app = {
        let mut app = Object::new();
        for (surface, required) in abp::conformance::corpus::FLOOR {
            let mut row = Object::new();
            for class in abp::conformance::corpus::CLASSES {
                let n = usize::from(surface == "json.decode" && class == "valid");
                let cell = if n == 1 || required.contains(&class) {
                    Value::int(n as i64)
                } else {
                    j(r#"{"n_a":"no"}"#)
                };
                row.insert(class, cell);
            }
            app.insert(surface, Value::Object(row));
        }
        Value::Object(app)
    };
    let tight = |k: &str| DecodeBounds::tighten(&obj(&format!(r#"{{"{k}":2}}"#))).unwrap();
    let ceiling = |k: CeilingKey, text: &str| {
        (
            Code::Ceiling(k),
            err(json::decode(text.as_bytes(), &tight(k.name()))),
        )
    };
    vec![
        (
            Code::AttestationMalformed,
            err(signature::check_attestation(&j("{}"))),
        ),
        (
            Code::AudienceMismatch,
            err(federation::verify_commitment(
                &env,
                &ctx(&|c| c.audience = Some("other".into())),
            )),
        ),
        (Code::Base64urlInvalid, err(base64url::decode("a+b"))),
        (Code::Base64urlPadded, err(base64url::decode("QQ=="))),
        (
            Code::BindingAttestationStale,
            err(deployment::verify_binding(
                &dp,
                &bp,
                &BindingContext {
                    now: Some("2027-01-01T00:00:00Z".into()),
                    max_attestation_age_ms: Some(1),
                    observed_descriptors: vec![],
                },
            )),
        ),
        (
            Code::BindingDescriptorMismatch,
            err(deployment::verify_binding(
                &dp,
                &bp,
                &BindingContext {
                    observed_descriptors: vec![("acme.test.lookup".into(), "sha-256:other".into())],
                    ..BindingContext::default()
                },
            )),
        ),
        (
            Code::BindingIncomplete,
            err(deployment::verify_binding(
                &deployment(&bp, |o| {
                    set_path(o, &["tool_bindings"], Value::Array(vec![]))
                }),
                &bp,
                &BindingContext::default(),
            )),
        ),
        (
            Code::BoundSourceMissing,
            runner::run_case(&source_missing, &empty_corpus)
                .actual
                .unwrap_err()
                .code,
        ),
        (
            Code::BoundUnitMismatch,
            err(bounds_of("").meet(
                &BoundSet::from_value(
                    &j(&bound_set_json(r#","max_attempts":1"#).replace("EUR", "USD")),
                    "b",
                )
                .unwrap(),
            )),
        ),
        (
            Code::BoundUnknown,
            err(BoundSet::from_value(
                &j(&bound_set_json(r#","max_attempts":1,"max_width":1"#)),
                "b",
            )),
        ),
        (
            Code::BoundValueInvalid,
            err(BoundSet::from_value(
                &j(&bound_set_json(r#","max_attempts":0"#)),
                "b",
            )),
        ),
        (
            Code::CompatibilityDuplicateEntry,
            err(compatibility::verify(
                &dp,
                &[ident("acme_pkg", "1.2.3"), ident("acme_pkg", "1.2.3")],
            )),
        ),
        (
            Code::CompatibilityEntryMissing,
            err(compatibility::verify(&dp, &[ident("other", "1.2.3")])),
        ),
        (
            Code::CompatibilityIdentityInexact,
            err(compatibility::verify(&dp, &[ident("acme_pkg", "^1.2")])),
        ),
        (
            Code::CorpusApplicabilityIncomplete,
            load(corpus_files(
                &cases_file(CASE),
                1,
                true,
                1,
                Value::Object(Object::new()),
            )),
        ),
        (
            Code::CorpusCaseIdDuplicate,
            load(corpus_files(
                &cases_file(&format!("{CASE},{CASE}")),
                2,
                true,
                2,
                full_app.clone(),
            )),
        ),
        (
            Code::CorpusCaseInvalid,
            load(corpus_files(
                &cases_file(&CASE.replace("json.decode", "json.nope")),
                1,
                true,
                1,
                full_app.clone(),
            )),
        ),
        (
            Code::CorpusCountMismatch,
            load(corpus_files(
                &cases_file(CASE),
                2,
                true,
                2,
                full_app.clone(),
            )),
        ),
        (
            Code::CorpusEmpty,
            load(corpus_files(&cases_file(""), 0, true, 0, full_app.clone())),
        ),
        (Code::CorpusFileSetMismatch, {
            let mut f = corpus_files(&cases_file(CASE), 1, true, 1, full_app.clone());
            f.insert(".stray".into(), vec![]);
            load(f)
        }),
        (
            Code::CorpusHashMismatch,
            load(corpus_files(
                &cases_file(CASE),
                1,
                false,
                1,
                full_app.clone(),
            )),
        ),
        (Code::CorpusIndexInvalid, load(BTreeMap::new())),
        (
            Code::DeploymentDigestMismatch,
            err(deployment::verify_binding(
                &dp,
                &blueprint(|o| o.insert("release_number", Value::int(2))),
                &BindingContext::default(),
            )),
        ),
        (
            Code::DigestAlgorithmUnsupported,
            err(Digest::parse_tagged("sha-512:abc")),
        ),
        (
            Code::DigestEncodingInvalid,
            err(Digest::parse_tagged("nope")),
        ),
        (
            Code::DigestMismatch,
            err(digest::verify_content(
                Domain::Signature,
                b"a",
                &Digest::compute(Domain::Signature, b"b").to_tagged(),
            )),
        ),
        (
            Code::DuplicateMember,
            err(json::decode(br#"{"a":1,"a":1}"#, &DecodeBounds::MAX)),
        ),
        (
            Code::ExtensionCriticalityConflict,
            err(extension::negotiate(
                &artifact(
                    r#"{"critical":{},"optional":{"com.example/federation":{}}}"#,
                    1,
                    "[]",
                ),
                &fed_support(None),
            )),
        ),
        (
            Code::ExtensionDuplicate,
            err(extension::negotiate(
                &artifact(
                    r#"{"critical":{"com.example.platform/estate":{}},"optional":{"com.example.platform/estate":{}}}"#,
                    1,
                    "[]",
                ),
                &fed_support(None),
            )),
        ),
        (
            Code::ExtensionNamespaceInvalid,
            err(extension::negotiate(
                &artifact(r#"{"critical":{},"optional":{"bad":{}}}"#, 1, "[]"),
                &fed_support(None),
            )),
        ),
        (
            Code::ExtensionPayloadForbidden,
            err(extension::negotiate(
                &artifact(
                    r#"{"critical":{},"optional":{"com.example/unknown":{"a":{"max_tokens":9}}}}"#,
                    1,
                    "[]",
                ),
                &fed_support(None),
            )),
        ),
        (Code::ExtensionRetired, {
            let mut s = fed_support(None);
            s.registry
                .insert("com.example.commerce/graph", j(r#"{"state":"retired"}"#));
            err(extension::negotiate(
                &artifact(
                    r#"{"critical":{"com.example.commerce/graph":{}},"optional":{}}"#,
                    1,
                    "[]",
                ),
                &s,
            ))
        }),
        (
            Code::ExtensionSchemaDigestMismatch,
            err(extension::negotiate(
                &artifact(
                    r#"{"critical":{"com.example/federation":{}},"optional":{}}"#,
                    1,
                    "[]",
                ),
                &fed_support(Some(r#"{"type":"array"}"#)),
            )),
        ),
        (
            Code::ExtensionSchemaUnavailable,
            err(extension::negotiate(
                &artifact(
                    r#"{"critical":{"com.example/federation":{}},"optional":{}}"#,
                    1,
                    "[]",
                ),
                &fed_support(None),
            )),
        ),
        (
            Code::ExtensionUnknownCritical,
            err(extension::negotiate(
                &artifact(
                    r#"{"critical":{"com.example/absent":{}},"optional":{}}"#,
                    1,
                    "[]",
                ),
                &fed_support(Some(FED_SCHEMA)),
            )),
        ),
        (
            Code::FederationMappingConflict,
            err(federation::to_mcp_state("rejected")),
        ),
        (
            Code::FederationStateUnmappable,
            err(federation::from_a2a_state("TASK_STATE_UNSPECIFIED")),
        ),
        (Code::FederationTerminalConflict, {
            let c = ctx(&|c| {
                c.prior_receipts.push(PriorReceipt {
                    task_identity: "task-1".into(),
                    terminal_state: "failed".into(),
                    commitment: "sha-256:x".into(),
                })
            });
            err(federation::verify_commitment(&env, &c))
        }),
        (
            Code::ForbiddenPortableValue,
            err(portability::scan(&j(r#"{"password":"x"}"#), &[])),
        ),
        (
            Code::IntegerMagnitude,
            err(json::parse_number(&"9".repeat(400))),
        ),
        (
            Code::InvalidCardinality,
            err(schema::validate_instance(
                &j(r#"{"maxItems":0}"#),
                &j("[1]"),
            )),
        ),
        (
            Code::InvalidConstraint,
            err(schema::validate_instance(&j(r#"{"minimum":2}"#), &j("1"))),
        ),
        (
            Code::InvalidEncoding,
            err(json::decode(b"\"\xff\"", &DecodeBounds::MAX)),
        ),
        (
            Code::InvalidNumber,
            err(json::decode(b"01", &DecodeBounds::MAX)),
        ),
        (
            Code::InvalidSyntax,
            err(json::decode(b"{", &DecodeBounds::MAX)),
        ),
        (
            Code::InvalidType,
            err(schema::validate_instance(
                &j(r#"{"type":"string"}"#),
                &j("1"),
            )),
        ),
        (
            Code::LifecycleStateInvalid,
            err(Deployment::decode(
                &deployment_bytes(&bp, |o| {
                    set_path(o, &["lifecycle", "state"], Value::string("paused"))
                }),
                &DecodeBounds::MAX,
            )),
        ),
        (
            Code::MissingCeiling,
            err(BoundSet::from_value(&j(&bound_set_json("")), "b")),
        ),
        (
            Code::MissingRequiredField,
            err(schema::validate_instance(
                &j(r#"{"required":["a"]}"#),
                &j("{}"),
            )),
        ),
        (
            Code::NoAuthoritativeRecovery,
            err(deployment::verify_binding(
                &deployment(&bp, |o| {
                    set_path(
                        o,
                        &["effect_owner", "idempotency", "recovery"],
                        Value::string("none"),
                    )
                }),
                &bp,
                &BindingContext::default(),
            )),
        ),
        (
            Code::NonCanonicalBytes,
            err(json::decode_canonical(b"{ }", &DecodeBounds::MAX)),
        ),
        (
            Code::NonportableContent,
            err(Envelope::from_value(&{
                let mut v = obj(std::str::from_utf8(&env.canonical_bytes()).unwrap());
                v.insert(
                    "identity_mapping_evidence",
                    j(r#"{"claims":[{"kind":"grant","value":"admin"}]}"#),
                );
                Value::Object(v)
            })),
        ),
        (
            Code::NumberNotDoubleExpressible,
            err(json::decode(b"9007199254740993", &DecodeBounds::MAX)),
        ),
        (Code::PredicateNodesExceeded, {
            let wide = vec![r#"{"op":"exists","path":"out"}"#; 70].join(",");
            err(predicate::check(
                &j(&format!(r#"{{"op":"or","args":[{wide}]}}"#)),
                &["out"],
            ))
        }),
        (
            Code::PredicateOpUnknown,
            err(predicate::check(
                &j(r#"{"op":"xor","path":"out","value":1}"#),
                &["out"],
            )),
        ),
        (
            Code::PredicatePathUnresolved,
            err(predicate::check(
                &j(r#"{"op":"exists","path":"in.x"}"#),
                &["out"],
            )),
        ),
        (
            Code::ProtectedBoundClampDenied,
            err(bounds::intersect(
                &bounds_of(""),
                &bounds_of(""),
                &{
                    let mut h = bounds_of("");
                    h.protected[0] = 0;
                    h
                },
                Posture::Deny,
            )),
        ),
        (
            Code::ProtocolRevisionUnsupported,
            err(extension::negotiate(
                &artifact(r#"{"critical":{},"optional":{}}"#, 2, "[]"),
                &fed_support(None),
            )),
        ),
        (
            Code::RequiredCoreFieldNotDigestCovered,
            err(extension::negotiate(
                &artifact(r#"{"critical":{},"optional":{}}"#, 1, r#"["attestations"]"#),
                &fed_support(None),
            )),
        ),
        (
            Code::RequiredCoreFieldUnsupported,
            err(extension::negotiate(
                &artifact(
                    r#"{"critical":{},"optional":{}}"#,
                    1,
                    r#"["no_such_member"]"#,
                ),
                &fed_support(None),
            )),
        ),
        (
            Code::SchemaComplexityExceeded,
            err(schema::compile(&j(&format!(
                r#"{{"allOf":[{}]}}"#,
                vec!["{}"; 600].join(",")
            )))),
        ),
        (
            Code::SchemaDialectUnknown,
            err(schema::compile(&j(r#"{"$schema":"urn:other"}"#))),
        ),
        (Code::SchemaInvalidShape, err(schema::compile(&j("[]")))),
        (
            Code::SchemaKeywordNotAllowed,
            err(schema::compile(&j(r#"{"pattern":"x"}"#))),
        ),
        (
            Code::SchemaKeywordValueInvalid,
            err(schema::compile(&j(r#"{"minItems":-1}"#))),
        ),
        (
            Code::SchemaRefCycle,
            err(schema::compile(&j(
                r##"{"$defs":{"a":{"$ref":"#/$defs/a"}}}"##,
            ))),
        ),
        (
            Code::SchemaRefUnresolvable,
            err(schema::compile(&j(r##"{"$ref":"#/nowhere"}"##))),
        ),
        (
            Code::SignatureAlgorithmUnsupported,
            err(Entry::parse(&sig_entry("ES256"))),
        ),
        (
            Code::SignatureKeyUnsupported,
            err(Entry::parse(&sig_entry("EdDSA")).unwrap().verify(&[])),
        ),
        (Code::SignatureMalformed, err(Entry::parse(&j("{}")))),
        (
            Code::SignatureNotVerified,
            err(Entry::parse(&sig_entry("EdDSA"))
                .unwrap()
                .verify(&[host_key()])),
        ),
        (
            Code::TrailingBytes,
            err(json::decode(b"1 2", &DecodeBounds::MAX)),
        ),
        (
            Code::UnknownBound,
            err(DecodeBounds::tighten(&obj(r#"{"width":1}"#))),
        ),
        (
            Code::UnknownMember,
            err(schema::validate_instance(
                &j(r#"{"additionalProperties":false}"#),
                &j(r#"{"a":1}"#),
            )),
        ),
        ceiling(CeilingKey::Bytes, "[1,2]"),
        ceiling(CeilingKey::Depth, "[[[1]]]"),
        ceiling(CeilingKey::Items, "[1,2,3]"),
        ceiling(CeilingKey::Key, r#"{"abc":1}"#),
        ceiling(CeilingKey::Members, r#"{"a":1,"b":2,"c":3}"#),
        ceiling(CeilingKey::Nodes, "[1,2]"),
        ceiling(CeilingKey::NumberLexeme, "123"),
        ceiling(CeilingKey::String, r#""abc""#),
    ]
}

#[test]
fn every_declared_code_is_reachable_through_the_public_api() {
    let triggers = triggers();
    let mut covered = BTreeSet::new();
    for (declared, produced) in &triggers {
        assert_eq!(
            declared, produced,
            "trigger for {declared} produced {produced}"
        );
        covered.insert(*declared);
    }
    let all: BTreeSet<Code> = Code::all().collect();
    let missing: Vec<_> = all.difference(&covered).collect();
    assert!(missing.is_empty(), "unreached codes: {missing:?}");
    assert_eq!(all.len(), 74 + 8);
}

#[test]
fn the_declared_vocabulary_is_exactly_the_spec_table_and_wire_names_round_trip() {
    let names: BTreeSet<&str> = NAMED_CODES.iter().map(|c| c.as_str()).collect();
    assert_eq!(names.len(), 74);
    for c in Code::all() {
        assert_eq!(Code::from_wire(c.as_str()), Some(c));
    }
    assert_eq!(Code::from_wire("unauthorized"), None);
    let Some(shared) = common::shared_dir() else {
        println!("SKIP: ../shared not found; spec table cross-check skipped");
        return;
    };
    let spec = std::fs::read_to_string(shared.join("specs/abp.md")).unwrap();
    let table = spec
        .split("The 74 codes of this release")
        .nth(1)
        .unwrap()
        .split("Plus the parameterized")
        .next()
        .unwrap();
    let spec_codes: BTreeSet<&str> = table
        .lines()
        .filter_map(|l| l.strip_prefix("| "))
        .filter_map(|l| l.split(' ').next())
        .filter(|c| {
            c.chars()
                .all(|ch| ch.is_ascii_lowercase() || ch == '_' || ch.is_ascii_digit())
                && !c.is_empty()
                && *c != "Code"
        })
        .collect();
    assert_eq!(names, spec_codes);
}

#[test]
fn errors_carry_a_subject_and_display_their_code() {
    let e: Error = Digest::parse_tagged("nope").unwrap_err();
    assert!(e.to_string().starts_with("digest_encoding_invalid"));
    assert!(!e.subject.is_empty());
}
