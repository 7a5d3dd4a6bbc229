//! The federation profile (spec 11): the 23-member TaskEnvelope, A2A/MCP state codecs, the terminal
//! commitment and `verify_commitment`. Correlation grants nothing.

use crate::blueprint::{CLASSIFICATION, en};
use crate::bounds::MARKERS;
use crate::digest::{Digest, Domain};
use crate::error::{Code, Error, Result};
use crate::jcs;
use crate::json::{self, DecodeBounds, Object, Value};
use crate::portability;
use crate::shape::{self, ArrayShape, Form, ObjectShape, Shape, opt, req};
use crate::signature::{Entry, HostKey};

/// The registered namespace that carries the envelope on both transports.
pub const NAMESPACE: &str = "com.example/federation";

/// Terminal states; cancellation stays a request and is never terminal (spec 11).
const TERMINAL: &[&str] = &["completed", "failed", "rejected"];
const CHECKPOINT_STATUS: &[&str] = &["working", "input_required", "auth_required"];
const CHECKPOINT_KIND: &[&str] = &["input", "auth", "cancel"];
const AUTHORITY_NAMES: &[&str] = &[
    "grant",
    "grants",
    "scope",
    "scopes",
    "role",
    "roles",
    "permission",
    "permissions",
    "authority",
    "entitlement",
    "entitlements",
];

const fn ident() -> Shape {
    Shape::Str(Form::Identity)
}
const fn digest() -> Shape {
    Shape::Str(Form::TaggedDigest)
}

static MARKER_LIST: ArrayShape = ArrayShape {
    item: en(MARKERS),
    min: 0,
    max: Some(2),
    unique_by: Some(""),
    duplicate: Code::InvalidCardinality,
};
static CLASSIFICATION_ELEMENT: ObjectShape = ObjectShape {
    fields: &[
        req("level", en(CLASSIFICATION)),
        req("markers", Shape::Array(&MARKER_LIST)),
    ],
    missing: Code::MissingRequiredField,
};
static TIME_POLICY: ObjectShape = ObjectShape {
    fields: &[req("elapsed_ms", Shape::PositiveInt)],
    missing: Code::MissingRequiredField,
};
static RESOURCE_POLICY: ObjectShape = ObjectShape {
    fields: &[
        req("attempts", Shape::PositiveInt),
        req("concurrency", Shape::PositiveInt),
        req("tokens", Shape::PositiveInt),
        req("cost", Shape::PositiveInt),
    ],
    missing: Code::MissingRequiredField,
};
static CHECKPOINT_REQUEST: ObjectShape = ObjectShape {
    fields: &[
        req("kind", en(CHECKPOINT_KIND)),
        req("request_digest", digest()),
    ],
    missing: Code::MissingRequiredField,
};
static RECEIPT: ObjectShape = ObjectShape {
    fields: &[
        req("result_digest", digest()),
        req("checkpoint_history_commitment", digest()),
        req("terminal_commitment", digest()),
        req("signature", Shape::AnyObject),
    ],
    missing: Code::MissingRequiredField,
};
static COMPAT_REF: ObjectShape = ObjectShape {
    fields: &[
        req("name", ident()),
        req("identity", Shape::Str(Form::NonEmpty)),
    ],
    missing: Code::MissingRequiredField,
};
static COMPAT_REFS: ArrayShape = ArrayShape {
    item: Shape::Object(&COMPAT_REF),
    min: 1,
    max: Some(128),
    unique_by: Some("name"),
    duplicate: Code::InvalidCardinality,
};
static PROOF_REFS: ArrayShape = ArrayShape {
    item: digest(),
    min: 0,
    max: Some(128),
    unique_by: None,
    duplicate: Code::InvalidCardinality,
};

static ENVELOPE: ObjectShape = ObjectShape {
    fields: &[
        req("task_identity", ident()),
        req("idempotency_identity", ident()),
        opt("parent_execution_reference", ident()),
        opt("initiating_subject", ident()),
        req("blueprint_digest", digest()),
        req("deployment_digest", digest()),
        req("input_commitment", digest()),
        req("result_schema", digest()),
        req(
            "result_classification_ceiling",
            Shape::Object(&CLASSIFICATION_ELEMENT),
        ),
        req("time_policy", Shape::Object(&TIME_POLICY)),
        req("resource_policy", Shape::Object(&RESOURCE_POLICY)),
        req("recovery_handle", ident()),
        req("issuer", ident()),
        req("subject", ident()),
        req("audience", ident()),
        req("identity_mapping_evidence", Shape::AnyObject),
        opt("checkpoint_request", Shape::Object(&CHECKPOINT_REQUEST)),
        opt("checkpoint_status", en(CHECKPOINT_STATUS)),
        opt("checkpoint_commitment", digest()),
        opt("terminal_state", en(TERMINAL)),
        opt("evidence_receipt", Shape::Object(&RECEIPT)),
        req("compatibility_reference", Shape::Array(&COMPAT_REFS)),
        req("authority_proof_references", Shape::Array(&PROOF_REFS)),
    ],
    missing: Code::MissingRequiredField,
};

/// A decoded TaskEnvelope.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    value: Object,
}

impl Envelope {
    /// Bounded decode: structure, cross-member hooks, evidence and portability guards (spec 11).
    pub fn decode(bytes: &[u8], bounds: &DecodeBounds) -> Result<Envelope> {
        let v = json::decode(bytes, bounds)?;
        Envelope::from_value(&v)
    }

    /// Check a decoded value.
    pub fn from_value(v: &Value) -> Result<Envelope> {
        shape::check_object(&ENVELOPE, v, "")?;
        let o = v
            .as_object()
            .ok_or_else(|| Error::new(Code::InvalidType, "envelope"))?;
        if o.contains("checkpoint_status") && o.contains("terminal_state") {
            return Err(Error::new(Code::InvalidConstraint, "checkpoint_status"));
        }
        if o.contains("terminal_state") != o.contains("evidence_receipt") {
            return Err(Error::new(Code::InvalidConstraint, "terminal_state"));
        }
        if let Some(sig) = o.get("evidence_receipt").and_then(|r| r.get("signature")) {
            Entry::parse(sig)?;
        }
        check_evidence(o.get("identity_mapping_evidence").unwrap_or(&Value::Null))?;
        portability::scan(v, &[])?;
        Ok(Envelope { value: o.clone() })
    }

    /// The canonical JCS bytes.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        jcs::encode(&Value::Object(self.value.clone()))
    }

    /// The task identity.
    pub fn task_identity(&self) -> &str {
        self.str("task_identity")
    }

    fn str(&self, k: &str) -> &str {
        self.value
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// The terminal commitment over the seven components (spec 11, notes 2).
    pub fn terminal_commitment(&self) -> Digest {
        let receipt = self
            .value
            .get("evidence_receipt")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut c = shape::pick(
            &self.value,
            &[
                "task_identity",
                "terminal_state",
                "result_classification_ceiling",
                "compatibility_reference",
                "authority_proof_references",
            ],
        );
        for k in ["result_digest", "checkpoint_history_commitment"] {
            c.insert(k, receipt.get(k).cloned().unwrap_or(Value::Null));
        }
        Digest::compute(Domain::FederationEnvelope, &jcs::encode(&Value::Object(c)))
    }

    /// The receipt binding: the envelope digest with `evidence_receipt.signature` removed (notes 2).
    pub fn receipt_binding(&self) -> Digest {
        let mut v = self.value.clone();
        if let Some(Value::Object(r)) = self.value.get("evidence_receipt") {
            v.insert("evidence_receipt", Value::Object(r.without(&["signature"])));
        }
        Digest::compute(Domain::FederationEnvelope, &jcs::encode(&Value::Object(v)))
    }
}

/// Identity-mapping evidence is correlation material only: an authority-shaped claim denies
/// `nonportable_content` (spec 18).
fn check_evidence(v: &Value) -> Result<()> {
    let deny = || Error::new(Code::NonportableContent, "identity_mapping_evidence");
    match v {
        Value::Object(o) => {
            for (k, item) in o.iter() {
                if AUTHORITY_NAMES.contains(&k.to_ascii_lowercase().as_str()) {
                    return Err(deny());
                }
                if k == "kind" && item.as_str() != Some("correlation") {
                    return Err(deny());
                }
                check_evidence(item)?;
            }
            Ok(())
        }
        Value::Array(items) => items.iter().try_for_each(check_evidence),
        _ => Ok(()),
    }
}

/// A receipt previously accepted for a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriorReceipt {
    /// Task identity.
    pub task_identity: String,
    /// Its terminal state.
    pub terminal_state: String,
    /// Its terminal commitment (tagged).
    pub commitment: String,
}

/// The receiving context of `verify_commitment`.
#[derive(Debug, Clone, Default)]
pub struct CommitmentContext {
    /// Host-supplied keys.
    pub keys: Vec<HostKey>,
    /// Expected audience.
    pub audience: Option<String>,
    /// Expected issuer.
    pub issuer: Option<String>,
    /// Expected subject.
    pub subject: Option<String>,
    /// Allowed key ids per issuer; when an issuer is listed, only those keys verify for it.
    pub issuer_key_sets: Vec<(String, Vec<String>)>,
    /// Signatures created at or before this instant are stale.
    pub created_after: Option<String>,
    /// Signatures created at or after this instant are not yet valid.
    pub created_before: Option<String>,
    /// Receipts already accepted.
    pub prior_receipts: Vec<PriorReceipt>,
}

/// Verify a terminal receipt (spec 11), in order: JWS → binding → commitment recompute →
/// issuer/subject/audience → conflict with prior receipts → freshness.
pub fn verify_commitment(env: &Envelope, ctx: &CommitmentContext) -> Result<String> {
    let receipt = env
        .value
        .get("evidence_receipt")
        .ok_or_else(|| Error::new(Code::MissingRequiredField, "evidence_receipt"))?;
    let entry = Entry::parse(receipt.get("signature").unwrap_or(&Value::Null))?;
    if entry.purpose() != "federation-envelope" {
        return Err(Error::new(
            Code::SignatureNotVerified,
            "signature.signed_attributes.purpose",
        ));
    }
    let issuer = env.str("issuer");
    if let Some((_, kids)) = ctx.issuer_key_sets.iter().find(|(i, _)| i == issuer)
        && !kids.iter().any(|k| k == entry.kid())
    {
        return Err(Error::new(
            Code::SignatureKeyUnsupported,
            "signature.protected.kid",
        ));
    }
    entry.verify(&ctx.keys)?;
    if entry.content_digest() != env.receipt_binding() {
        return Err(Error::new(
            Code::SignatureNotVerified,
            "signature.signed_attributes.content_digest",
        ));
    }
    let commitment = env.terminal_commitment();
    let declared = receipt
        .get("terminal_commitment")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if Digest::parse_tagged(declared)? != commitment {
        return Err(Error::new(
            Code::DigestMismatch,
            "evidence_receipt.terminal_commitment",
        ));
    }
    for (expected, field) in [
        (&ctx.issuer, "issuer"),
        (&ctx.subject, "subject"),
        (&ctx.audience, "audience"),
    ] {
        if expected.as_ref().is_some_and(|e| e != env.str(field)) {
            return Err(Error::new(Code::AudienceMismatch, field));
        }
    }
    let ours = commitment.to_tagged();
    for prior in ctx
        .prior_receipts
        .iter()
        .filter(|p| p.task_identity == env.task_identity())
    {
        if prior.commitment != ours || prior.terminal_state != env.str("terminal_state") {
            return Err(Error::new(
                Code::FederationTerminalConflict,
                "evidence_receipt",
            ));
        }
    }
    let created = shape::parse_timestamp_ms(entry.created_at()).unwrap_or(i64::MIN);
    let stale = |bound: &Option<String>, too_early: bool| -> Result<bool> {
        let Some(b) = bound else { return Ok(false) };
        let b = shape::parse_timestamp_ms(b)
            .ok_or_else(|| Error::new(Code::InvalidConstraint, "context"))?;
        Ok(if too_early {
            created <= b
        } else {
            created >= b
        })
    };
    if stale(&ctx.created_after, true)? || stale(&ctx.created_before, false)? {
        return Err(Error::new(
            Code::BindingAttestationStale,
            "signature.signed_attributes.created_at",
        ));
    }
    Ok(env.task_identity().to_owned())
}

/// Logical task states shared by both transports.
pub const LOGICAL_STATES: &[&str] = &[
    "submitted",
    "working",
    "input_required",
    "auth_required",
    "completed",
    "failed",
    "cancelled",
    "rejected",
];

const A2A: &[(&str, &str)] = &[
    ("TASK_STATE_SUBMITTED", "submitted"),
    ("TASK_STATE_WORKING", "working"),
    ("TASK_STATE_INPUT_REQUIRED", "input_required"),
    ("TASK_STATE_AUTH_REQUIRED", "auth_required"),
    ("TASK_STATE_COMPLETED", "completed"),
    ("TASK_STATE_FAILED", "failed"),
    ("TASK_STATE_CANCELLED", "cancelled"),
    ("TASK_STATE_REJECTED", "rejected"),
];
const MCP: &[(&str, &str)] = &[
    ("working", "working"),
    ("input_required", "input_required"),
    ("completed", "completed"),
    ("failed", "failed"),
    ("cancelled", "cancelled"),
];

/// A2A wire state → logical state; `TASK_STATE_UNSPECIFIED` and unknown states are unmappable.
pub fn from_a2a_state(s: &str) -> Result<&'static str> {
    A2A.iter()
        .find(|(w, _)| *w == s)
        .map(|(_, l)| *l)
        .ok_or_else(|| Error::new(Code::FederationStateUnmappable, "state"))
}

/// Logical state → A2A wire state.
pub fn to_a2a_state(logical: &str) -> Result<&'static str> {
    A2A.iter()
        .find(|(_, l)| *l == logical)
        .map(|(w, _)| *w)
        .ok_or_else(|| Error::new(Code::InvalidType, "state"))
}

/// MCP task status → logical state.
pub fn from_mcp_state(s: &str) -> Result<&'static str> {
    MCP.iter()
        .find(|(w, _)| *w == s)
        .map(|(_, l)| *l)
        .ok_or_else(|| Error::new(Code::FederationStateUnmappable, "state"))
}

/// Logical state → MCP task status. `submitted` is carried as `working` (lossy-aware); `rejected`
/// and `auth_required` have no consistent MCP mapping and deny the crossing.
pub fn to_mcp_state(logical: &str) -> Result<&'static str> {
    match logical {
        "submitted" => Ok("working"),
        "rejected" | "auth_required" => Err(Error::new(Code::FederationMappingConflict, "state")),
        _ if LOGICAL_STATES.contains(&logical) => MCP
            .iter()
            .find(|(_, l)| *l == logical)
            .map(|(w, _)| *w)
            .ok_or_else(|| Error::new(Code::InvalidType, "state")),
        _ => Err(Error::new(Code::InvalidType, "state")),
    }
}

/// Decode an envelope carried in A2A `Task.metadata` or MCP `_meta` under [`NAMESPACE`].
pub fn from_carrier(carrier: &Value, container: &str) -> Result<Envelope> {
    let holder = carrier.get(container).unwrap_or(carrier);
    let body = holder
        .get(NAMESPACE)
        .ok_or_else(|| Error::new(Code::MissingRequiredField, NAMESPACE))?;
    Envelope::from_value(body)
}
