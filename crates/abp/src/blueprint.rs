//! Blueprint Core (spec 2): 18 members, canonical-first bounded decode in the pinned failure
//! precedence, cross-field hooks, the portability guard, then the content digest (notes 8.5).

use crate::digest::{Digest, Domain};
use crate::error::{Code, Error, Result};
use crate::jcs;
use crate::json::{self, DecodeBounds, Object, Value};
use crate::portability;
use crate::predicate;
use crate::shape::{self, ArrayShape, Form, ObjectShape, Shape, opt, req};
use crate::signature;

/// The 18 Blueprint Core members (spec 2).
pub const MEMBERS: &[&str] = &[
    "blueprint_id",
    "protocol_revision",
    "producer",
    "release_number",
    "capability_requirements",
    "input_ports",
    "output_ports",
    "output_contract",
    "triggers",
    "ceilings",
    "classification_ceiling",
    "effect_intents",
    "evaluation_assertions",
    "extensions",
    "required_core_fields",
    "content_digest",
    "signatures",
    "attestations",
];

/// Members excluded from the content digest input (spec 5).
pub const DIGEST_EXCLUDED: &[&str] = &["content_digest", "signatures", "attestations"];

pub(crate) const CLASSIFICATION: &[&str] = &["public", "internal", "restricted", "confidential"];
pub(crate) const OPERATION_KIND: &[&str] = &["read", "computation", "mutation"];
pub(crate) const IMPACT: &[&str] = &["ordinary", "money", "authority", "secret"];
pub(crate) const APPROVAL: &[&str] = &["none", "human_required", "separated_human_required"];
pub(crate) const AUTHORITY: &[&str] = &["none", "local_policy", "external_authority_required"];
const TRIGGERS: &[&str] = &["condition", "delegated", "evaluation", "manual", "schedule"];

pub(crate) const fn en(values: &'static [&'static str]) -> Shape {
    Shape::Enum(values, Code::InvalidConstraint)
}

pub(crate) const fn list(item: Shape, max: usize, unique_by: Option<&'static str>) -> ArrayShape {
    ArrayShape {
        item,
        min: 0,
        max: Some(max),
        unique_by,
        duplicate: Code::InvalidCardinality,
    }
}

pub(crate) static COST: ObjectShape = ObjectShape {
    fields: &[
        req("amount", Shape::PositiveInt),
        req("currency", Shape::Str(Form::NonEmpty)),
    ],
    missing: Code::MissingRequiredField,
};

static PRODUCER: ObjectShape = ObjectShape {
    fields: &[
        req("identity", Shape::Str(Form::Identity)),
        req("created_at", Shape::Str(Form::Timestamp)),
        req("toolchain", Shape::Str(Form::NonEmpty)),
    ],
    missing: Code::MissingRequiredField,
};

static CAPABILITY: ObjectShape = ObjectShape {
    fields: &[
        req("operation_family", Shape::Str(Form::Identity)),
        req("argument_schema", Shape::SchemaDocument),
        req("result_schema", Shape::SchemaDocument),
        req("operation_kind", en(OPERATION_KIND)),
        req("impact_class", en(IMPACT)),
        req("classification_ceiling", en(CLASSIFICATION)),
        req("approval_trait", en(APPROVAL)),
        req("authority_trait", en(AUTHORITY)),
    ],
    missing: Code::MissingRequiredField,
};

static PORT: ObjectShape = ObjectShape {
    fields: &[
        req("name", Shape::Str(Form::Identity)),
        req("schema", Shape::SchemaDocument),
        req("classification_ceiling", en(CLASSIFICATION)),
        req("required", Shape::Bool),
    ],
    missing: Code::MissingRequiredField,
};

static OUTPUT_CONTRACT: ObjectShape = ObjectShape {
    fields: &[
        req("port", Shape::Str(Form::Identity)),
        req("classification_ceiling", en(CLASSIFICATION)),
    ],
    missing: Code::MissingRequiredField,
};

/// The eight operational ceilings; an absent one is `missing_ceiling`, never infinity (spec 9).
static CEILINGS: ObjectShape = ObjectShape {
    fields: &[
        req("max_attempts", Shape::PositiveInt),
        req("max_concurrency", Shape::PositiveInt),
        req("max_depth", Shape::PositiveInt),
        req("max_descendants", Shape::PositiveInt),
        req("max_elapsed_ms", Shape::PositiveInt),
        req("max_fan_out", Shape::PositiveInt),
        req("max_tokens", Shape::PositiveInt),
        req("max_cost", Shape::Object(&COST)),
    ],
    missing: Code::MissingCeiling,
};

static EFFECT: ObjectShape = ObjectShape {
    fields: &[
        req("logical_operation", Shape::Str(Form::Identity)),
        req("operation_kind", en(OPERATION_KIND)),
        req("impact_class", en(IMPACT)),
    ],
    missing: Code::MissingRequiredField,
};

pub(crate) static EXTENSIONS: ObjectShape = ObjectShape {
    fields: &[
        req("critical", Shape::AnyObject),
        req("optional", Shape::AnyObject),
    ],
    missing: Code::MissingRequiredField,
};

static CAPABILITIES: ArrayShape = list(Shape::Object(&CAPABILITY), 64, Some("operation_family"));
static PORTS: ArrayShape = list(Shape::Object(&PORT), 64, Some("name"));
static EFFECTS: ArrayShape = list(Shape::Object(&EFFECT), 64, Some("logical_operation"));
static ASSERTIONS: ArrayShape = list(Shape::AnyObject, 128, None);
static TRIGGER_LIST: ArrayShape = ArrayShape {
    item: en(TRIGGERS),
    min: 1,
    max: None,
    unique_by: Some(""),
    duplicate: Code::InvalidCardinality,
};
pub(crate) static REQUIRED_FIELDS: ArrayShape = ArrayShape {
    item: Shape::Str(Form::Any),
    min: 0,
    max: None,
    unique_by: Some(""),
    duplicate: Code::InvalidCardinality,
};
pub(crate) static SIGNATURES: ArrayShape = list(Shape::Any, 16, None);

static BLUEPRINT: ObjectShape = ObjectShape {
    fields: &[
        req("blueprint_id", Shape::Str(Form::ProducerQualified)),
        req("protocol_revision", Shape::PositiveInt),
        req("release_number", Shape::PositiveInt),
        req("producer", Shape::Object(&PRODUCER)),
        req("capability_requirements", Shape::Array(&CAPABILITIES)),
        req("input_ports", Shape::Array(&PORTS)),
        req("output_ports", Shape::Array(&PORTS)),
        req("output_contract", Shape::Object(&OUTPUT_CONTRACT)),
        req("triggers", Shape::Array(&TRIGGER_LIST)),
        req("ceilings", Shape::Object(&CEILINGS)),
        req("classification_ceiling", en(CLASSIFICATION)),
        req("effect_intents", Shape::Array(&EFFECTS)),
        req("evaluation_assertions", Shape::Array(&ASSERTIONS)),
        req("extensions", Shape::Object(&EXTENSIONS)),
        req("required_core_fields", Shape::Array(&REQUIRED_FIELDS)),
        opt("signatures", Shape::Array(&SIGNATURES)),
        opt("attestations", Shape::Array(&SIGNATURES)),
        req("content_digest", Shape::Str(Form::TaggedDigest)),
    ],
    missing: Code::MissingRequiredField,
};

/// A decoded Blueprint: its exact canonical bytes, its value and its content digest.
#[derive(Debug, Clone, PartialEq)]
pub struct Blueprint {
    bytes: Vec<u8>,
    value: Object,
    digest: Digest,
}

impl Blueprint {
    /// Assemble from parts that already passed every decode check (reconcile runs them as stages).
    pub(crate) fn from_checked(bytes: &[u8], value: Value, digest: Digest) -> Option<Blueprint> {
        let Value::Object(value) = value else {
            return None;
        };
        Some(Blueprint {
            bytes: bytes.to_vec(),
            value,
            digest,
        })
    }

    /// The bounded, canonical-first decode (spec 2, 3): bytes → canonical check → structure →
    /// hooks → portability → digest.
    pub fn decode(bytes: &[u8], bounds: &DecodeBounds) -> Result<Blueprint> {
        let value = json::decode_canonical(bytes, bounds)?;
        check_structure(&value)?;
        portability::scan(&value, &["extensions"])?;
        let digest = verify_digest(&value)?;
        let Value::Object(value) = value else {
            return Err(Error::new(Code::InvalidType, "blueprint"));
        };
        Ok(Blueprint {
            bytes: bytes.to_vec(),
            value,
            digest,
        })
    }

    /// The content digest (the artifact's identity).
    pub fn content_digest(&self) -> Digest {
        self.digest
    }

    /// The exact canonical bytes received.
    pub fn canonical_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The decoded value.
    pub fn value(&self) -> &Object {
        &self.value
    }

    /// The `blueprint_id`.
    pub fn blueprint_id(&self) -> &str {
        self.value
            .get("blueprint_id")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// The `release_number`.
    pub fn release_number(&self) -> i64 {
        self.value
            .get("release_number")
            .and_then(Value::as_int)
            .unwrap_or_default()
    }
}

/// The structure and cross-field hook checks (spec 2).
pub fn check_structure(value: &Value) -> Result<()> {
    shape::check_object(&BLUEPRINT, value, "")?;
    let o = value
        .as_object()
        .ok_or_else(|| Error::new(Code::InvalidType, "blueprint"))?;
    hooks(o)
}

/// Recompute and compare the content digest (spec 5): `digest_mismatch` on tamper.
pub fn verify_digest(value: &Value) -> Result<Digest> {
    shape::verify_declared_digest(
        value,
        "content_digest",
        Domain::BlueprintContent,
        DIGEST_EXCLUDED,
    )
}

/// `H("blueprint-content", JCS(doc minus content_digest, signatures, attestations))`.
pub fn compute_digest(o: &Object) -> Digest {
    Digest::compute(
        Domain::BlueprintContent,
        &jcs::encode(&Value::Object(o.without(DIGEST_EXCLUDED))),
    )
}

fn names<'a>(o: &'a Object, member: &str, key: &str) -> Vec<&'a str> {
    o.get(member)
        .and_then(Value::as_array)
        .unwrap_or_default()
        .iter()
        .filter_map(|p| p.get(key).and_then(Value::as_str))
        .collect()
}

fn hooks(o: &Object) -> Result<()> {
    let id = o
        .get("blueprint_id")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let producer = o
        .get("producer")
        .and_then(|p| p.get("identity"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    if id.split_once('/').map(|(p, _)| p) != Some(producer) {
        return Err(Error::new(Code::InvalidConstraint, "blueprint_id"));
    }
    let outputs = names(o, "output_ports", "name");
    let inputs = names(o, "input_ports", "name");
    let contract_port = o
        .get("output_contract")
        .and_then(|c| c.get("port"))
        .and_then(Value::as_str);
    if !contract_port.is_some_and(|p| outputs.contains(&p)) {
        return Err(Error::new(Code::InvalidConstraint, "output_contract.port"));
    }
    let ports: Vec<&str> = inputs.iter().chain(outputs.iter()).copied().collect();
    for (i, a) in o
        .get("evaluation_assertions")
        .and_then(Value::as_array)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        check_assertion(a, &outputs, &ports, &format!("evaluation_assertions[{i}]"))?;
    }
    check_common_hooks(o)
}

/// Hooks shared by both artifacts: extension namespaces, signature and attestation envelopes.
pub(crate) fn check_common_hooks(o: &Object) -> Result<()> {
    if let Some(ext) = o.get("extensions") {
        let (critical, optional) = crate::extension::split_sections(ext)?;
        for ns in critical.keys().chain(optional.keys()) {
            if !crate::extension::namespace_is_valid(ns) {
                return Err(Error::new(
                    Code::ExtensionNamespaceInvalid,
                    format!("extensions.{ns}"),
                ));
            }
        }
        if let Some(ns) = critical.keys().find(|ns| optional.contains(ns)) {
            return Err(Error::new(
                Code::ExtensionDuplicate,
                format!("extensions.{ns}"),
            ));
        }
    }
    for s in o
        .get("signatures")
        .and_then(Value::as_array)
        .unwrap_or_default()
    {
        signature::Entry::parse(s)?;
    }
    for a in o
        .get("attestations")
        .and_then(Value::as_array)
        .unwrap_or_default()
    {
        signature::check_attestation(a)?;
    }
    Ok(())
}

fn check_assertion(a: &Value, outputs: &[&str], ports: &[&str], path: &str) -> Result<()> {
    let o = a
        .as_object()
        .ok_or_else(|| Error::new(Code::InvalidType, path))?;
    match o.get("kind").and_then(Value::as_str) {
        Some("output_schema") => {
            if let Some(k) = o
                .keys()
                .find(|k| !["kind", "port", "schema"].contains(&k.as_str()))
            {
                return Err(Error::new(Code::UnknownMember, format!("{path}.{k}")));
            }
            let port = o.get("port").and_then(Value::as_str);
            if !port.is_some_and(|p| outputs.contains(&p)) {
                return Err(Error::new(Code::InvalidConstraint, format!("{path}.port")));
            }
            let schema = o
                .get("schema")
                .ok_or_else(|| Error::new(Code::MissingRequiredField, format!("{path}.schema")))?;
            crate::schema::compile(schema).map(|_| ())
        }
        Some("predicate") => {
            if let Some(k) = o
                .keys()
                .find(|k| !["kind", "predicate"].contains(&k.as_str()))
            {
                return Err(Error::new(Code::UnknownMember, format!("{path}.{k}")));
            }
            let p = o.get("predicate").ok_or_else(|| {
                Error::new(Code::MissingRequiredField, format!("{path}.predicate"))
            })?;
            predicate::check(p, ports)
        }
        _ => Err(Error::new(Code::InvalidConstraint, format!("{path}.kind"))),
    }
}
