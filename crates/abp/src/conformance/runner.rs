//! The runner (notes 5): maps each surface to its library call, builds inputs exactly as the
//! reference runner does (including the errors the runner itself produces, notes 8.6), and applies
//! the agreement rule.

use crate::base64url;
use crate::blueprint::Blueprint;
use crate::bounds::{self, BoundSet, Posture};
use crate::compatibility::{self, Identity};
use crate::conformance::corpus::{Case, Corpus, Expected};
use crate::deployment::{self, BindingContext, Deployment};
use crate::digest::{self, Digest, Domain};
use crate::error::{Code, Error, Result};
use crate::extension::{self, Support};
use crate::federation::{self, CommitmentContext, Envelope, PriorReceipt};
use crate::jcs;
use crate::json::{self, DecodeBounds, Object, Value};
use crate::portability;
use crate::schema;
use crate::signature::{Entry, HostKey};

/// A projected success value: JSON, or raw bytes (compared with the base64url fallback).
#[derive(Debug, Clone, PartialEq)]
pub enum Projected {
    /// A JSON value.
    Json(Value),
    /// Bytes.
    Bytes(Vec<u8>),
}

/// The outcome of one case.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The case id.
    pub id: String,
    /// The surface.
    pub surface: String,
    /// Whether actual and expected agree.
    pub agreed: bool,
    /// The actual result: projections, or the deny.
    pub actual: std::result::Result<Vec<(String, Projected)>, Error>,
}

/// Run every case of the corpus.
pub fn run(corpus: &Corpus) -> Vec<Outcome> {
    corpus.cases.iter().map(|c| run_case(c, corpus)).collect()
}

/// Run one case and apply the agreement rule.
pub fn run_case(case: &Case, corpus: &Corpus) -> Outcome {
    let actual = execute(case, corpus);
    let agreed = agrees(&case.expected, &actual);
    Outcome {
        id: case.id.clone(),
        surface: case.surface.clone(),
        agreed,
        actual,
    }
}

/// The agreement rule (notes 5): an invalid case needs an error with the same code string; a valid
/// case needs a success where every expected projection is present and equal (strings also match
/// when the expected string base64url-decodes to the actual bytes; numbers compare numerically).
pub fn agrees(
    expected: &Expected,
    actual: &std::result::Result<Vec<(String, Projected)>, Error>,
) -> bool {
    match (expected, actual) {
        (Expected::Invalid(code), Err(e)) => e.code.as_str() == code,
        (Expected::Valid(want), Ok(got)) => want.iter().all(|(k, w)| {
            got.iter()
                .find(|(gk, _)| gk == k)
                .is_some_and(|(_, g)| projection_eq(w, g))
        }),
        _ => false,
    }
}

fn projection_eq(want: &Value, got: &Projected) -> bool {
    match (want, got) {
        (Value::String(w), Projected::Bytes(b)) => {
            w.as_bytes() == b.as_slice() || base64url::decode(w).is_ok_and(|d| d == *b)
        }
        (Value::String(w), Projected::Json(Value::String(g))) => {
            w == g || base64url::decode(w).is_ok_and(|d| d == g.as_bytes())
        }
        (w, Projected::Json(g)) => schema::json_eq(w, g),
        _ => false,
    }
}

type Projections = Vec<(String, Projected)>;

/// A federation state codec.
type StateCodec = fn(&str) -> Result<&'static str>;

fn one(name: &str, v: Value) -> Result<Projections> {
    Ok(vec![(name.to_owned(), Projected::Json(v))])
}

fn invalid_type(what: &str) -> Error {
    Error::new(Code::InvalidType, what)
}

/// The input bytes rule (notes 5): `non_binary` → `invalid_type`; `text`; decoded `base64url`
/// (a decode failure is `invalid_type`); a `raw_file` sidecar; otherwise `invalid_type`.
fn input_bytes(input: &Object, corpus: &Corpus) -> Result<Vec<u8>> {
    if input.get("non_binary") == Some(&Value::Bool(true)) {
        return Err(invalid_type("input"));
    }
    if let Some(t) = input.get("text") {
        return t
            .as_str()
            .map(|s| s.as_bytes().to_vec())
            .ok_or_else(|| invalid_type("input.text"));
    }
    if let Some(b) = input.get("base64url") {
        let s = b.as_str().ok_or_else(|| invalid_type("input.base64url"))?;
        return base64url::decode(s).map_err(|_| invalid_type("input.base64url"));
    }
    if let Some(p) = input.get("raw_file").and_then(Value::as_str) {
        return corpus
            .files
            .get(p)
            .cloned()
            .ok_or_else(|| invalid_type("input.raw_file"));
    }
    Err(invalid_type("input"))
}

/// The optional parse-ceiling override: a non-map is the runner's own `invalid_type`.
fn input_bounds(input: &Object) -> Result<DecodeBounds> {
    match input.get("bounds") {
        None => Ok(DecodeBounds::MAX),
        Some(Value::Object(o)) => DecodeBounds::tighten(o),
        Some(_) => Err(invalid_type("input.bounds")),
    }
}

fn text<'a>(input: &'a Object, key: &str) -> Result<&'a str> {
    input
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| invalid_type(key))
}

fn keys(v: Option<&Value>) -> Result<Vec<HostKey>> {
    let list = v
        .and_then(Value::as_array)
        .ok_or_else(|| invalid_type("keys"))?;
    list.iter()
        .map(|k| {
            let id = k
                .get("key_id")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid_type("keys.key_id"))?;
            let key = k
                .get("key")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid_type("keys.key"))?;
            HostKey::from_base64url(id, key)
        })
        .collect()
}

fn execute(case: &Case, corpus: &Corpus) -> Result<Projections> {
    let input = &case.input;
    match case.surface.as_str() {
        "json.decode" => {
            let bytes = input_bytes(input, corpus)?;
            let v = json::decode(&bytes, &input_bounds(input)?)?;
            one("value", v)
        }
        "canonicalization.encode" => {
            let bytes = input_bytes(input, corpus)?;
            let bounds = input_bounds(input)?;
            let v = json::decode(&bytes, &DecodeBounds::MAX)?;
            let out = jcs::encode_bounded(&v, bounds.bytes)?;
            Ok(vec![("encoded".to_owned(), Projected::Bytes(out))])
        }
        "base64url.decode" => {
            let bytes = base64url::decode(text(input, "base64url")?)?;
            Ok(vec![("decoded".to_owned(), Projected::Bytes(bytes))])
        }
        "digest.tagged" => {
            if let Some(t) = input.get("tagged") {
                let d = Digest::parse_tagged(t.as_str().ok_or_else(|| invalid_type("tagged"))?)?;
                return one("tagged", Value::string(d.to_tagged()));
            }
            let domain =
                Domain::from_name(text(input, "domain")?).ok_or_else(|| invalid_type("domain"))?;
            let bytes = input_bytes(input, corpus)?;
            digest::verify_content(domain, &bytes, text(input, "declared")?)?;
            one("verified", Value::Bool(true))
        }
        "signature.verify" => {
            let entry = json::decode(text(input, "entry")?.as_bytes(), &DecodeBounds::MAX)?;
            let keys = keys(input.get("keys"))?;
            Entry::parse(&entry)?.verify(&keys)?;
            one("verified", Value::Bool(true))
        }
        "schema.validate_instance" => {
            let doc = match (
                input.get("schema"),
                input.get("schema_file").and_then(Value::as_str),
            ) {
                (Some(s), _) => s.clone(),
                (None, Some(path)) => {
                    let bytes = corpus
                        .files
                        .get(path)
                        .ok_or_else(|| invalid_type("schema_file"))?;
                    json::decode(bytes, &DecodeBounds::MAX)?
                }
                (None, None) => return Err(invalid_type("schema")),
            };
            if let Some(d) = input.get("dialect")
                && !matches!(d.as_str(), Some("default") | Some(schema::DIALECT))
            {
                return Err(Error::new(Code::SchemaDialectUnknown, "dialect"));
            }
            let instance = input
                .get("instance")
                .ok_or_else(|| invalid_type("instance"))?;
            schema::validate_instance(&doc, instance)?;
            one("valid", Value::Bool(true))
        }
        "blueprint.decode" => {
            let b = Blueprint::decode(&input_bytes(input, corpus)?, &input_bounds(input)?)?;
            one("digest", Value::string(b.content_digest().to_tagged()))
        }
        "deployment.decode" => {
            let d = Deployment::decode(&input_bytes(input, corpus)?, &input_bounds(input)?)?;
            if let Some(binding) = input.get("binding") {
                let bo = binding.as_object().ok_or_else(|| invalid_type("binding"))?;
                let b = Blueprint::decode(text(bo, "blueprint")?.as_bytes(), &DecodeBounds::MAX)?;
                let ctx = BindingContext {
                    now: bo.get("now").and_then(Value::as_str).map(str::to_owned),
                    max_attestation_age_ms: bo
                        .get("max_attestation_age_ms")
                        .and_then(Value::as_int),
                    observed_descriptors: vec![],
                };
                deployment::verify_binding(&d, &b, &ctx)?;
            }
            one("digest", Value::string(d.deployment_digest().to_tagged()))
        }
        "negotiation.negotiate" | "extension.resolve" => {
            let artifact = input
                .get("artifact")
                .ok_or_else(|| invalid_type("artifact"))?;
            let support = support(input.get("support"))?;
            let n = extension::negotiate(artifact, &support)?;
            let strings =
                |v: &[String]| Value::Array(v.iter().cloned().map(Value::String).collect());
            Ok(vec![
                (
                    "revision".to_owned(),
                    Projected::Json(Value::int(n.revision)),
                ),
                ("critical".to_owned(), Projected::Json(strings(&n.critical))),
                (
                    "quarantined".to_owned(),
                    Projected::Json(strings(&n.quarantined)),
                ),
                ("notices".to_owned(), Projected::Json(strings(&n.notices))),
            ])
        }
        "bounds.new" => match input.get("bounds") {
            Some(Value::Object(o)) => one("bounds", DecodeBounds::tighten(o)?.to_value()),
            _ => Err(invalid_type("bounds")),
        },
        "bounds_algebra.intersect" => {
            let source = |k: &str| -> Result<BoundSet> {
                let v = input
                    .get(k)
                    .ok_or_else(|| Error::new(Code::BoundSourceMissing, k))?;
                BoundSet::from_value(v, k)
            };
            let (b, d, h) = (source("blueprint")?, source("deployment")?, source("host")?);
            let posture = match input.get("protected_clamp").map(Value::as_str) {
                None | Some(Some("deny")) => Posture::Deny,
                Some(Some("acknowledge")) => Posture::Acknowledge,
                Some(_) => return Err(invalid_type("protected_clamp")),
            };
            let i = bounds::intersect(&b, &d, &h, posture)?;
            Ok(vec![
                (
                    "effective".to_owned(),
                    Projected::Json(i.effective.to_value()),
                ),
                (
                    "clamp_count".to_owned(),
                    Projected::Json(Value::int(i.clamps.len() as i64)),
                ),
            ])
        }
        "portability.scan" => {
            let v = json::decode(&input_bytes(input, corpus)?, &DecodeBounds::MAX)?;
            portability::scan(&v, &[])?;
            one("clean", Value::Bool(true))
        }
        "compatibility.verify" => {
            let d = Deployment::decode(&input_bytes(input, corpus)?, &DecodeBounds::MAX)?;
            let observed = input
                .get("observed")
                .and_then(|o| o.get("identities"))
                .and_then(Value::as_array)
                .ok_or_else(|| invalid_type("observed"))?;
            let ids = observed
                .iter()
                .map(|v| Identity::from_value(v).ok_or_else(|| invalid_type("observed.identities")))
                .collect::<Result<Vec<_>>>()?;
            compatibility::verify(&d, &ids)?;
            one("verified", Value::Bool(true))
        }
        "federation.decode" => federation_decode(input, corpus),
        "federation.verify_commitment" => {
            let env = Envelope::decode(text(input, "envelope")?.as_bytes(), &DecodeBounds::MAX)?;
            let ctx = commitment_context(input.get("context"))?;
            one(
                "task_identity",
                Value::string(federation::verify_commitment(&env, &ctx)?),
            )
        }
        _ => Err(invalid_type("surface")),
    }
}

fn federation_decode(input: &Object, corpus: &Corpus) -> Result<Projections> {
    let codecs: [(&str, StateCodec); 4] = [
        ("from_a2a_state", federation::from_a2a_state),
        ("to_a2a_state", federation::to_a2a_state),
        ("from_mcp_state", federation::from_mcp_state),
        ("to_mcp_state", federation::to_mcp_state),
    ];
    for (key, codec) in codecs {
        if let Some(v) = input.get(key) {
            let s = v.as_str().ok_or_else(|| invalid_type(key))?;
            // notes 8.6: a `to_*` argument that is not a logical state is the runner's invalid_type.
            if key.starts_with("to_") && !federation::LOGICAL_STATES.contains(&s) {
                return Err(invalid_type(key));
            }
            return one("value", Value::string(codec(s)?));
        }
    }
    for (key, container) in [
        ("from_a2a_carrier", "metadata"),
        ("from_mcp_carrier", "_meta"),
    ] {
        if let Some(v) = input.get(key) {
            federation::from_carrier(v, container)?;
            return one("decoded", Value::Bool(true));
        }
    }
    let env = Envelope::decode(&input_bytes(input, corpus)?, &input_bounds(input)?)?;
    Ok(vec![(
        "canonical".to_owned(),
        Projected::Bytes(env.canonical_bytes()),
    )])
}

fn support(v: Option<&Value>) -> Result<Support> {
    let o = v
        .and_then(Value::as_object)
        .ok_or_else(|| invalid_type("support"))?;
    let mut s = Support::default();
    for r in o
        .get("revisions")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid_type("support.revisions"))?
    {
        s.revisions.insert(
            r.as_int()
                .ok_or_else(|| invalid_type("support.revisions"))?,
        );
    }
    for f in o
        .get("core_fields")
        .and_then(Value::as_array)
        .unwrap_or_default()
    {
        s.core_fields.insert(
            f.as_str()
                .ok_or_else(|| invalid_type("support.core_fields"))?
                .to_owned(),
        );
    }
    let map = |k: &str| -> Result<Object> {
        match o.get(k) {
            None => Ok(Object::new()),
            Some(Value::Object(m)) => Ok(m.clone()),
            Some(_) => Err(invalid_type(k)),
        }
    };
    s.registry = map("registry")?;
    s.schemas = map("schemas")?;
    Ok(s)
}

fn commitment_context(v: Option<&Value>) -> Result<CommitmentContext> {
    let o = v
        .and_then(Value::as_object)
        .ok_or_else(|| invalid_type("context"))?;
    let opt = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_owned);
    let mut ctx = CommitmentContext {
        keys: keys(o.get("keys"))?,
        audience: opt("audience"),
        issuer: opt("issuer"),
        subject: opt("subject"),
        created_after: opt("created_after"),
        created_before: opt("created_before"),
        ..CommitmentContext::default()
    };
    if let Some(sets) = o.get("issuer_key_sets") {
        let m = sets
            .as_object()
            .ok_or_else(|| invalid_type("issuer_key_sets"))?;
        for (issuer, kids) in m.iter() {
            let kids = kids
                .as_array()
                .ok_or_else(|| invalid_type("issuer_key_sets"))?
                .iter()
                .map(|k| {
                    k.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| invalid_type("issuer_key_sets"))
                })
                .collect::<Result<Vec<_>>>()?;
            ctx.issuer_key_sets.push((issuer.clone(), kids));
        }
    }
    for p in o
        .get("prior_receipts")
        .and_then(Value::as_array)
        .unwrap_or_default()
    {
        let s = |k: &str| {
            p.get(k)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| invalid_type("prior_receipts"))
        };
        ctx.prior_receipts.push(PriorReceipt {
            task_identity: s("task_identity")?,
            terminal_state: s("terminal_state")?,
            commitment: s("commitment")?,
        });
    }
    Ok(ctx)
}
