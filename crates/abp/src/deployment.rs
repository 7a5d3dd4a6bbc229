//! Deployment Manifest (spec 2): 19 members, canonical-first bounded decode, hooks (identity-exact
//! build identities, lifecycle), portability, then the deployment digest (notes 8.4, 8.5); and the
//! binding verification against one Blueprint (spec 10).

use crate::blueprint::{
    self, APPROVAL, AUTHORITY, CLASSIFICATION, COST, EXTENSIONS, IMPACT, REQUIRED_FIELDS,
    SIGNATURES, en, list,
};
use crate::compatibility;
use crate::digest::{Digest, Domain};
use crate::error::{Code, Error, Result};
use crate::jcs;
use crate::json::{self, DecodeBounds, Object, Value};
use crate::portability;
use crate::shape::{self, ArrayShape, Form, ObjectShape, Shape, opt, req};

/// The 19 Deployment Manifest members (spec 2).
pub const MEMBERS: &[&str] = &[
    "protocol_revision",
    "blueprint_release",
    "scope_projection",
    "tool_bindings",
    "data_bindings",
    "authority_requirement",
    "effect_owner",
    "signer_custody",
    "eligibility",
    "model_policy",
    "host_bounds",
    "lifecycle",
    "build_identities",
    "evaluation_binding",
    "extensions",
    "required_core_fields",
    "deployment_digest",
    "signatures",
    "attestations",
];

/// Members excluded from the deployment digest input (spec 5).
pub const DIGEST_EXCLUDED: &[&str] = &["deployment_digest", "signatures", "attestations"];

const DISCLOSURE: &[&str] = &["none", "summary", "detail", "full"];

const fn ident() -> Shape {
    Shape::Str(Form::Identity)
}

const fn digest() -> Shape {
    Shape::Str(Form::TaggedDigest)
}

static BLUEPRINT_RELEASE: ObjectShape = ObjectShape {
    fields: &[
        req("blueprint_id", Shape::Str(Form::ProducerQualified)),
        req("release_number", Shape::PositiveInt),
        req("content_digest", digest()),
    ],
    missing: Code::MissingRequiredField,
};
static SCOPE: ObjectShape = ObjectShape {
    fields: &[req("adapter_identity", ident())],
    missing: Code::MissingRequiredField,
};
static TOOL_BINDING: ObjectShape = ObjectShape {
    fields: &[
        req("logical_operation", ident()),
        req("adapter_identity", ident()),
        req("descriptor_digest", digest()),
        req("schema_digest", digest()),
        req("attested_at", Shape::Str(Form::Timestamp)),
    ],
    missing: Code::MissingRequiredField,
};
static AS_OF: ObjectShape = ObjectShape {
    fields: &[
        req("mode", en(&["none", "required"])),
        req("max_age_ms", Shape::Any),
    ],
    missing: Code::MissingRequiredField,
};
static DATA_BINDING: ObjectShape = ObjectShape {
    fields: &[
        req("logical_dataset", ident()),
        req("classification_ceiling", en(CLASSIFICATION)),
        req("as_of", Shape::Object(&AS_OF)),
    ],
    missing: Code::MissingRequiredField,
};
static AUTHORITY_REQ: ObjectShape = ObjectShape {
    fields: &[
        req("adapter_identity", ident()),
        req("profile_identity", ident()),
    ],
    missing: Code::MissingRequiredField,
};
static IDEMPOTENCY: ObjectShape = ObjectShape {
    fields: &[
        req("key_derivation", en(&["host"])),
        req("recovery", en(&["none", "authoritative"])),
    ],
    missing: Code::MissingRequiredField,
};
static EFFECT_OWNER: ObjectShape = ObjectShape {
    fields: &[
        req("adapter_identity", ident()),
        req("idempotency", Shape::Object(&IDEMPOTENCY)),
    ],
    missing: Code::MissingRequiredField,
};
static ELIGIBILITY: ObjectShape = ObjectShape {
    fields: &[
        req("owner", Shape::AnyObject),
        req("beneficiary", Shape::AnyObject),
        req("runtime_principal", Shape::AnyObject),
    ],
    missing: Code::MissingRequiredField,
};
static ROLES: ArrayShape = ArrayShape {
    item: Shape::Str(Form::NonEmpty),
    min: 0,
    max: Some(64),
    unique_by: Some(""),
    duplicate: Code::InvalidCardinality,
};
static MODEL_POLICY: ObjectShape = ObjectShape {
    fields: &[
        req("allowed_model_roles", Shape::Array(&ROLES)),
        req("max_tokens", Shape::PositiveInt),
        req("max_cost", Shape::Object(&COST)),
    ],
    missing: Code::MissingRequiredField,
};
/// Host bounds: the 13 bound members; an absent one is `missing_ceiling` (spec 9).
static HOST_BOUNDS: ObjectShape = ObjectShape {
    fields: &[
        req("approval_trait", en(APPROVAL)),
        req("authority_trait", en(AUTHORITY)),
        req("classification_ceiling", en(CLASSIFICATION)),
        req("disclosure_ceiling", en(DISCLOSURE)),
        req("effect_impact_ceiling", en(IMPACT)),
        req("max_attempts", Shape::PositiveInt),
        req("max_concurrency", Shape::PositiveInt),
        req("max_cost", Shape::Object(&COST)),
        req("max_depth", Shape::PositiveInt),
        req("max_descendants", Shape::PositiveInt),
        req("max_elapsed_ms", Shape::PositiveInt),
        req("max_fan_out", Shape::PositiveInt),
        req("max_tokens", Shape::PositiveInt),
    ],
    missing: Code::MissingCeiling,
};
static LIFECYCLE: ObjectShape = ObjectShape {
    fields: &[
        req(
            "state",
            Shape::Enum(&["draft", "active", "retired"], Code::LifecycleStateInvalid),
        ),
        opt("activated_at", Shape::Str(Form::Timestamp)),
        opt("retired_at", Shape::Str(Form::Timestamp)),
    ],
    missing: Code::MissingRequiredField,
};
static BUILD_IDENTITY: ObjectShape = ObjectShape {
    fields: &[
        req("kind", en(&["package", "build", "adapter", "extension"])),
        req("name", ident()),
        req("version", Shape::Str(Form::NonEmpty)),
        req("digest", digest()),
    ],
    missing: Code::MissingRequiredField,
};
static CORPUS: ObjectShape = ObjectShape {
    fields: &[req("name", ident()), req("digest", digest())],
    missing: Code::MissingRequiredField,
};
static EVALUATION_BINDING: ObjectShape = ObjectShape {
    fields: &[
        req("adapter_identity", ident()),
        req("corpus", Shape::Object(&CORPUS)),
    ],
    missing: Code::MissingRequiredField,
};
static TOOL_BINDINGS: ArrayShape =
    list(Shape::Object(&TOOL_BINDING), 128, Some("logical_operation"));
static DATA_BINDINGS: ArrayShape = list(Shape::Object(&DATA_BINDING), 64, Some("logical_dataset"));
static BUILD_IDENTITIES: ArrayShape = ArrayShape {
    item: Shape::Object(&BUILD_IDENTITY),
    min: 1,
    max: Some(128),
    unique_by: Some("name"),
    duplicate: Code::CompatibilityDuplicateEntry,
};

static DEPLOYMENT: ObjectShape = ObjectShape {
    fields: &[
        req("protocol_revision", Shape::PositiveInt),
        req("blueprint_release", Shape::Object(&BLUEPRINT_RELEASE)),
        req("scope_projection", Shape::Object(&SCOPE)),
        req("tool_bindings", Shape::Array(&TOOL_BINDINGS)),
        req("data_bindings", Shape::Array(&DATA_BINDINGS)),
        req("authority_requirement", Shape::Object(&AUTHORITY_REQ)),
        req("effect_owner", Shape::Object(&EFFECT_OWNER)),
        req(
            "signer_custody",
            en(&["host_managed", "external_kms", "holder_edge"]),
        ),
        req("eligibility", Shape::Object(&ELIGIBILITY)),
        req("model_policy", Shape::Object(&MODEL_POLICY)),
        req("host_bounds", Shape::Object(&HOST_BOUNDS)),
        req("lifecycle", Shape::Object(&LIFECYCLE)),
        req("build_identities", Shape::Array(&BUILD_IDENTITIES)),
        req("evaluation_binding", Shape::Object(&EVALUATION_BINDING)),
        req("extensions", Shape::Object(&EXTENSIONS)),
        req("required_core_fields", Shape::Array(&REQUIRED_FIELDS)),
        opt("signatures", Shape::Array(&SIGNATURES)),
        opt("attestations", Shape::Array(&SIGNATURES)),
        req("deployment_digest", digest()),
    ],
    missing: Code::MissingRequiredField,
};

/// A decoded Deployment Manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct Deployment {
    bytes: Vec<u8>,
    value: Object,
    digest: Digest,
}

impl Deployment {
    /// Assemble from parts that already passed every decode check (reconcile runs them as stages).
    pub(crate) fn from_checked(bytes: &[u8], value: Value, digest: Digest) -> Option<Deployment> {
        let Value::Object(value) = value else {
            return None;
        };
        Some(Deployment {
            bytes: bytes.to_vec(),
            value,
            digest,
        })
    }

    /// The bounded, canonical-first decode (spec 2, 3; notes 8.5 for the order).
    pub fn decode(bytes: &[u8], bounds: &DecodeBounds) -> Result<Deployment> {
        let value = json::decode_canonical(bytes, bounds)?;
        check_structure(&value)?;
        portability::scan(&value, &["extensions"])?;
        let digest = verify_digest(&value)?;
        let Value::Object(value) = value else {
            return Err(Error::new(Code::InvalidType, "deployment"));
        };
        Ok(Deployment {
            bytes: bytes.to_vec(),
            value,
            digest,
        })
    }

    /// The deployment digest (the manifest's identity).
    pub fn deployment_digest(&self) -> Digest {
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

    /// The declared build identities.
    pub fn build_identities(&self) -> Vec<compatibility::Identity> {
        self.value
            .get("build_identities")
            .and_then(Value::as_array)
            .unwrap_or_default()
            .iter()
            .filter_map(compatibility::Identity::from_value)
            .collect()
    }
}

/// The structure and cross-field hook checks (spec 2).
pub fn check_structure(value: &Value) -> Result<()> {
    shape::check_object(&DEPLOYMENT, value, "")?;
    let o = value
        .as_object()
        .ok_or_else(|| Error::new(Code::InvalidType, "deployment"))?;
    hooks(o)
}

/// Recompute and compare the deployment digest: a tampered manifest denies `digest_mismatch`
/// (notes 8.4).
pub fn verify_digest(value: &Value) -> Result<Digest> {
    shape::verify_declared_digest(
        value,
        "deployment_digest",
        Domain::DeploymentContent,
        DIGEST_EXCLUDED,
    )
}

/// `H("deployment-content", JCS(doc minus deployment_digest, signatures, attestations))`.
pub fn compute_digest(o: &Object) -> Digest {
    Digest::compute(
        Domain::DeploymentContent,
        &jcs::encode(&Value::Object(o.without(DIGEST_EXCLUDED))),
    )
}

fn hooks(o: &Object) -> Result<()> {
    for (i, b) in o
        .get("build_identities")
        .and_then(Value::as_array)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let version = b.get("version").and_then(Value::as_str).unwrap_or_default();
        if !compatibility::version_is_exact(version) {
            return Err(Error::new(
                Code::CompatibilityIdentityInexact,
                format!("build_identities[{i}].version"),
            ));
        }
    }
    if let Some(l) = o.get("lifecycle") {
        let state = l.get("state").and_then(Value::as_str);
        let ok = match state {
            Some("active") => l.get("activated_at").is_some() && l.get("retired_at").is_none(),
            Some("retired") => l.get("retired_at").is_some(),
            _ => l.get("retired_at").is_none(),
        };
        if !ok {
            return Err(Error::new(Code::LifecycleStateInvalid, "lifecycle"));
        }
    }
    for (i, d) in o
        .get("data_bindings")
        .and_then(Value::as_array)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let as_of = d.get("as_of");
        let mode = as_of.and_then(|a| a.get("mode")).and_then(Value::as_str);
        let age = as_of.and_then(|a| a.get("max_age_ms"));
        let ok = match (mode, age) {
            (_, Some(Value::Number(_))) => age.and_then(Value::as_int).is_some_and(|a| a > 0),
            (Some("none"), Some(Value::Null)) => true,
            _ => false,
        };
        if !ok {
            return Err(Error::new(
                Code::InvalidConstraint,
                format!("data_bindings[{i}].as_of.max_age_ms"),
            ));
        }
    }
    blueprint::check_common_hooks(o)
}

/// Inputs to binding verification beyond the two artifacts (spec 10).
#[derive(Debug, Clone, Default)]
pub struct BindingContext {
    /// The verification time (RFC 3339), for attestation freshness.
    pub now: Option<String>,
    /// The freshness window for `attested_at`.
    pub max_attestation_age_ms: Option<i64>,
    /// Descriptor digests the host observed, by logical operation.
    pub observed_descriptors: Vec<(String, String)>,
}

/// Verify that `deployment` binds to exactly `blueprint` (spec 10), in pinned deny order: release
/// digest → completeness → recovery → descriptor equality → attestation freshness.
pub fn verify_binding(
    deployment: &Deployment,
    blueprint: &blueprint::Blueprint,
    ctx: &BindingContext,
) -> Result<()> {
    let d = deployment.value();
    let release = d.get("blueprint_release");
    let field = |k: &str| release.and_then(|r| r.get(k));
    let digest_ok = field("content_digest").and_then(Value::as_str)
        == Some(blueprint.content_digest().to_tagged().as_str());
    if !digest_ok
        || field("blueprint_id").and_then(Value::as_str) != Some(blueprint.blueprint_id())
        || field("release_number").and_then(Value::as_int) != Some(blueprint.release_number())
    {
        return Err(Error::new(
            Code::DeploymentDigestMismatch,
            "blueprint_release",
        ));
    }
    let bindings = d
        .get("tool_bindings")
        .and_then(Value::as_array)
        .unwrap_or_default();
    let bound = |op: &str| {
        bindings
            .iter()
            .any(|b| b.get("logical_operation").and_then(Value::as_str) == Some(op))
    };
    let b = blueprint.value();
    let caps = b
        .get("capability_requirements")
        .and_then(Value::as_array)
        .unwrap_or_default();
    let effects = b
        .get("effect_intents")
        .and_then(Value::as_array)
        .unwrap_or_default();
    let ops = caps
        .iter()
        .map(|c| (c.get("operation_family"), c.get("operation_kind")))
        .chain(
            effects
                .iter()
                .map(|e| (e.get("logical_operation"), e.get("operation_kind"))),
        );
    let recovery = d
        .get("effect_owner")
        .and_then(|e| e.get("idempotency"))
        .and_then(|i| i.get("recovery"))
        .and_then(Value::as_str);
    let mut mutation = false;
    for (name, kind) in ops {
        let name = name.and_then(Value::as_str).unwrap_or_default();
        if !bound(name) {
            return Err(Error::with_detail(
                Code::BindingIncomplete,
                "tool_bindings",
                name.to_owned(),
            ));
        }
        mutation |= kind.and_then(Value::as_str) == Some("mutation");
    }
    if mutation && recovery == Some("none") {
        return Err(Error::new(Code::NoAuthoritativeRecovery, "effect_owner"));
    }
    for (op, observed) in &ctx.observed_descriptors {
        let declared = bindings
            .iter()
            .find(|b| b.get("logical_operation").and_then(Value::as_str) == Some(op))
            .and_then(|b| b.get("descriptor_digest"))
            .and_then(Value::as_str);
        if declared != Some(observed.as_str()) {
            return Err(Error::with_detail(
                Code::BindingDescriptorMismatch,
                "tool_bindings",
                op.clone(),
            ));
        }
    }
    if let (Some(now), Some(max_age)) = (&ctx.now, ctx.max_attestation_age_ms) {
        let now = shape::parse_timestamp_ms(now)
            .ok_or_else(|| Error::new(Code::InvalidConstraint, "now"))?;
        for b in bindings {
            let at = b
                .get("attested_at")
                .and_then(Value::as_str)
                .and_then(shape::parse_timestamp_ms);
            if !at.is_some_and(|at| now - at <= max_age && at <= now) {
                return Err(Error::new(Code::BindingAttestationStale, "tool_bindings"));
            }
        }
    }
    Ok(())
}
