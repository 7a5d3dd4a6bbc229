//! The compiled-in extension registry (spec 8) and the evolution gate (spec 7): explicit revision
//! sets, the three `required_core_fields` checks, and the extension criticality table.

use std::collections::BTreeSet;

use crate::blueprint;
use crate::deployment;
use crate::digest::{Digest, Domain};
use crate::error::{Code, Error, Result};
use crate::jcs;
use crate::json::{Object, Value};
use crate::schema;

/// Declared criticality of a namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Criticality {
    /// Consumers must understand it.
    Critical,
    /// Consumers may ignore it.
    Optional,
}

impl Criticality {
    fn parse(s: &str) -> Option<Criticality> {
        match s {
            "critical" => Some(Criticality::Critical),
            "optional" => Some(Criticality::Optional),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Criticality::Critical => "critical",
            Criticality::Optional => "optional",
        }
    }
}

/// A namespace's registry lifecycle state (spec 7 table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Reserved, not usable critically.
    Reserved,
    /// Active.
    Active,
    /// Deprecated: supported with a notice.
    Deprecated,
    /// Retired: never reused.
    Retired,
}

impl State {
    fn parse(s: &str) -> Option<State> {
        match s {
            "reserved" => Some(State::Reserved),
            "active" => Some(State::Active),
            "deprecated" => Some(State::Deprecated),
            "retired" => Some(State::Retired),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            State::Reserved => "reserved",
            State::Active => "active",
            State::Deprecated => "deprecated",
            State::Retired => "retired",
        }
    }
}

/// One registry entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Reverse-DNS-plus-path namespace.
    pub namespace: String,
    /// Owner.
    pub owner: String,
    /// Registered criticality.
    pub criticality: Criticality,
    /// Lifecycle state.
    pub state: State,
    /// The pinned schema digest, when the body is schema-validated.
    pub schema_digest: Option<String>,
    /// The A2A extension URI.
    pub a2a_uri: String,
}

/// The registry as compiled into this release (spec 8; source `spec/registry/registry.json`).
pub fn compiled() -> Vec<Entry> {
    let e = |ns: &str, owner: &str, crit, state, pin: Option<&str>, uri: &str| Entry {
        namespace: ns.to_owned(),
        owner: owner.to_owned(),
        criticality: crit,
        state,
        schema_digest: pin.map(str::to_owned),
        a2a_uri: format!("https://example.com/extensions/{uri}"),
    };
    use Criticality::{Critical, Optional};
    vec![
        e(
            "com.example.commerce/graph",
            "ExampleCommerce",
            Critical,
            State::Active,
            None,
            "commerce-graph",
        ),
        e(
            "com.example.commerce/classification-labels",
            "ExampleCommerce",
            Optional,
            State::Active,
            None,
            "commerce-classification-labels",
        ),
        e(
            "com.example.commerce/rubric-assertion",
            "ExampleCommerce",
            Optional,
            State::Active,
            None,
            "commerce-rubric-assertion",
        ),
        e(
            "com.example.platform/estate",
            "ExamplePlatform",
            Optional,
            State::Deprecated,
            None,
            "platform-estate",
        ),
        e(
            "com.example.platform/estate-contract",
            "ExamplePlatform",
            Critical,
            State::Active,
            Some("sha-256:s_ToZWwxrhhd4vVxAyUh2Q6Gddston4tBSLHTLvCQAw"),
            "platform-estate-contract",
        ),
        e(
            "com.example/federation",
            "Agent Blueprint Protocol",
            Critical,
            State::Active,
            Some("sha-256:NgfEJT8JXJqRMpQS5TVBQDrk97-PzUtbgnRgWc8Dki0"),
            "federation",
        ),
    ]
}

/// The registry digest (notes 2): `H("extension-registry", JCS({namespace: entry without namespace}))`.
pub fn registry_digest() -> Digest {
    let map: Object = compiled()
        .into_iter()
        .map(|e| {
            let mut o = Object::new();
            o.insert("a2a_uri", Value::string(e.a2a_uri));
            o.insert("criticality", Value::string(e.criticality.as_str()));
            o.insert("owner", Value::string(e.owner));
            o.insert("promoted_at_revision", Value::Null);
            o.insert(
                "schema_digest",
                e.schema_digest.map_or(Value::Null, Value::String),
            );
            o.insert("state", Value::string(e.state.as_str()));
            (e.namespace, Value::Object(o))
        })
        .collect();
    Digest::compute(Domain::ExtensionRegistry, &jcs::encode(&Value::Object(map)))
}

/// Whether `ns` has the reverse-DNS-plus-path form (spec 8): lowercase, one `/`, bounded length,
/// and never parseable as a URI with a network authority.
pub fn namespace_is_valid(ns: &str) -> bool {
    let Some((domain, path)) = ns.split_once('/') else {
        return false;
    };
    ns.len() <= 128
        && !ns.contains("//")
        && !ns.contains(':')
        && domain.contains('.')
        && domain.split('.').all(|l| {
            !l.is_empty()
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
        && !path.is_empty()
        && path
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// What a consumer supports (spec 7): an explicit revision set, the core fields it honours, a
/// lifecycle view over the compiled registry, and host-supplied schemas for pinned bodies.
#[derive(Debug, Clone, Default)]
pub struct Support {
    /// Supported protocol revisions (a set, never a range).
    pub revisions: BTreeSet<i64>,
    /// Core members this consumer honours when an artifact requires them.
    pub core_fields: BTreeSet<String>,
    /// Lifecycle overrides and extra namespaces: `{ns: {criticality?, state, schema_digest?}}`.
    /// Criticality and schema pins of compiled entries always come from the compiled registry.
    pub registry: Object,
    /// Host-supplied schemas by namespace.
    pub schemas: Object,
}

impl Support {
    /// This release's support: revision 1, no extra core fields, the compiled registry as is.
    pub fn current() -> Support {
        Support {
            revisions: BTreeSet::from([1]),
            ..Support::default()
        }
    }
}

/// The outcome of negotiation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    /// The accepted revision.
    pub revision: i64,
    /// Supported critical namespaces, sorted.
    pub critical: Vec<String>,
    /// Unknown optional namespaces retained verbatim and unscanned, sorted.
    pub quarantined: Vec<String>,
    /// Typed notices (`extension_deprecated`, ...), sorted.
    pub notices: Vec<String>,
}

/// Core members that are evidence-only (not digest-covered, spec 5).
const EVIDENCE_ONLY: &[&str] = &[
    "signatures",
    "attestations",
    "content_digest",
    "deployment_digest",
];

/// Member names an extension payload may never carry: bounds ride only in core members.
const BOUND_NAMES: &[&str] = &[
    "max_attempts",
    "max_concurrency",
    "max_cost",
    "max_depth",
    "max_descendants",
    "max_elapsed_ms",
    "max_fan_out",
    "max_tokens",
    "classification_ceiling",
    "disclosure_ceiling",
    "effect_impact_ceiling",
    "authority_trait",
    "approval_trait",
];

/// The evolution gate over an artifact value (spec 7).
pub fn negotiate(artifact: &Value, support: &Support) -> Result<Negotiated> {
    let o = artifact
        .as_object()
        .ok_or_else(|| Error::new(Code::InvalidType, "artifact"))?;
    let revision = o
        .get("protocol_revision")
        .ok_or_else(|| Error::new(Code::MissingRequiredField, "protocol_revision"))?
        .as_int()
        .ok_or_else(|| Error::new(Code::InvalidType, "protocol_revision"))?;
    // notes 8.3: a revision below 1 is a constraint failure before set membership.
    if revision < 1 {
        return Err(Error::new(Code::InvalidConstraint, "protocol_revision"));
    }
    if !support.revisions.contains(&revision) {
        return Err(Error::new(
            Code::ProtocolRevisionUnsupported,
            "protocol_revision",
        ));
    }
    let members: &[&str] = if o.contains("deployment_digest") {
        deployment::MEMBERS
    } else {
        blueprint::MEMBERS
    };
    let required = o
        .get("required_core_fields")
        .ok_or_else(|| Error::new(Code::MissingRequiredField, "required_core_fields"))?
        .as_array()
        .ok_or_else(|| Error::new(Code::InvalidType, "required_core_fields"))?;
    for r in required {
        let name = r
            .as_str()
            .ok_or_else(|| Error::new(Code::InvalidType, "required_core_fields"))?;
        if !members.contains(&name) {
            return Err(Error::new(
                Code::RequiredCoreFieldUnsupported,
                "required_core_fields",
            ));
        }
        if EVIDENCE_ONLY.contains(&name) {
            return Err(Error::new(
                Code::RequiredCoreFieldNotDigestCovered,
                "required_core_fields",
            ));
        }
        if !support.core_fields.contains(name) {
            return Err(Error::new(
                Code::RequiredCoreFieldUnsupported,
                "required_core_fields",
            ));
        }
    }
    let ext = o
        .get("extensions")
        .ok_or_else(|| Error::new(Code::MissingRequiredField, "extensions"))?;
    resolve_extensions(ext, support, revision)
}

/// Resolve an `extensions` member `{critical: {ns: body}, optional: {ns: body}}` (spec 7 table).
pub fn resolve_extensions(ext: &Value, support: &Support, revision: i64) -> Result<Negotiated> {
    let (critical, optional) = split_sections(ext)?;
    let mut out = Negotiated {
        revision,
        critical: vec![],
        quarantined: vec![],
        notices: vec![],
    };
    let compiled = compiled();
    for (declared, section) in [
        (Criticality::Critical, critical),
        (Criticality::Optional, optional),
    ] {
        let mut names: Vec<&String> = section.keys().collect();
        names.sort_by(|a, b| jcs::utf16_cmp(a, b));
        for ns in names {
            let body = section.get(ns).unwrap_or(&Value::Null);
            resolve_one(ns, declared, body, support, &compiled, &mut out)?;
        }
    }
    if let Some(ns) = critical.keys().find(|ns| optional.contains(ns)) {
        return Err(Error::new(
            Code::ExtensionDuplicate,
            format!("extensions.{ns}"),
        ));
    }
    out.critical.sort();
    out.quarantined.sort();
    out.notices.sort();
    out.notices.dedup();
    Ok(out)
}

/// The `critical` and `optional` maps of an extensions member.
pub(crate) fn split_sections(ext: &Value) -> Result<(&Object, &Object)> {
    let o = ext
        .as_object()
        .ok_or_else(|| Error::new(Code::InvalidType, "extensions"))?;
    if let Some(k) = o.keys().find(|k| *k != "critical" && *k != "optional") {
        return Err(Error::new(Code::UnknownMember, format!("extensions.{k}")));
    }
    let section = |name: &str| -> Result<&Object> {
        o.get(name)
            .ok_or_else(|| Error::new(Code::MissingRequiredField, format!("extensions.{name}")))?
            .as_object()
            .ok_or_else(|| Error::new(Code::InvalidType, format!("extensions.{name}")))
    };
    Ok((section("critical")?, section("optional")?))
}

struct Resolved {
    criticality: Option<Criticality>,
    state: Option<State>,
    pin: Option<String>,
}

fn lookup(ns: &str, support: &Support, compiled: &[Entry]) -> Result<Resolved> {
    let view = support.registry.get(ns);
    let view_str = |k: &str| view.and_then(|v| v.get(k)).and_then(Value::as_str);
    let view_state =
        match view_str("state") {
            Some(s) => Some(State::parse(s).ok_or_else(|| {
                Error::new(Code::InvalidConstraint, format!("registry.{ns}.state"))
            })?),
            None => None,
        };
    if let Some(e) = compiled.iter().find(|e| e.namespace == ns) {
        return Ok(Resolved {
            criticality: Some(e.criticality),
            state: Some(view_state.unwrap_or(e.state)),
            pin: e.schema_digest.clone(),
        });
    }
    Ok(Resolved {
        criticality: view_str("criticality").and_then(Criticality::parse),
        state: view_state,
        pin: view_str("schema_digest").map(str::to_owned),
    })
}

fn resolve_one(
    ns: &str,
    declared: Criticality,
    body: &Value,
    support: &Support,
    compiled: &[Entry],
    out: &mut Negotiated,
) -> Result<()> {
    let subject = format!("extensions.{ns}");
    if !namespace_is_valid(ns) {
        return Err(Error::new(Code::ExtensionNamespaceInvalid, subject));
    }
    let r = lookup(ns, support, compiled)?;
    let registered = r.state.is_some() && r.criticality.is_some();
    match (declared, r.state) {
        (Criticality::Critical, None | Some(State::Reserved)) => {
            return Err(Error::new(Code::ExtensionUnknownCritical, subject));
        }
        (Criticality::Critical, Some(State::Retired)) => {
            return Err(Error::new(Code::ExtensionRetired, subject));
        }
        (Criticality::Optional, _) if !registered => {
            forbid_bound_payload(body, &subject)?;
            out.quarantined.push(ns.to_owned());
            return Ok(());
        }
        (Criticality::Optional, Some(State::Reserved)) => {
            forbid_bound_payload(body, &subject)?;
            out.notices.push("extension_reserved".to_owned());
            return Ok(());
        }
        (Criticality::Optional, Some(State::Retired)) => {
            forbid_bound_payload(body, &subject)?;
            out.notices.push("extension_retired".to_owned());
            return Ok(());
        }
        _ => {}
    }
    let state = r.state.unwrap_or(State::Active);
    if state == State::Active && r.criticality != Some(declared) {
        return Err(Error::new(Code::ExtensionCriticalityConflict, subject));
    }
    if state == State::Deprecated {
        out.notices.push("extension_deprecated".to_owned());
    }
    match declared {
        Criticality::Critical => {
            if let Some(pin) = &r.pin {
                let doc = support
                    .schemas
                    .get(ns)
                    .ok_or_else(|| Error::new(Code::ExtensionSchemaUnavailable, subject.clone()))?;
                let actual = Digest::compute(Domain::ExtensionSchema, &jcs::encode(doc));
                if actual.to_tagged() != *pin {
                    return Err(Error::new(Code::ExtensionSchemaDigestMismatch, subject));
                }
                schema::compile(doc)?.validate(body).map_err(|e| Error {
                    subject: subject.clone(),
                    ..e
                })?;
            } else {
                forbid_bound_payload(body, &subject)?;
            }
            out.critical.push(ns.to_owned());
        }
        Criticality::Optional => forbid_bound_payload(body, &subject)?,
    }
    Ok(())
}

/// Deny an unvalidated payload that carries a bound member at any depth (bounds ride only in core
/// members, so an extension can never widen or smuggle one).
fn forbid_bound_payload(body: &Value, subject: &str) -> Result<()> {
    match body {
        Value::Object(o) => {
            for (k, v) in o.iter() {
                if BOUND_NAMES.contains(&k.as_str()) {
                    return Err(Error::new(
                        Code::ExtensionPayloadForbidden,
                        format!("{subject}.{k}"),
                    ));
                }
                forbid_bound_payload(v, subject)?;
            }
            Ok(())
        }
        Value::Array(items) => items
            .iter()
            .try_for_each(|i| forbid_bound_payload(i, subject)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_follow_the_reverse_dns_plus_path_form() {
        assert!(namespace_is_valid("com.example/federation"));
        assert!(namespace_is_valid("com.example.platform/estate-contract"));
        assert!(!namespace_is_valid("https://example.com/x"));
        assert!(!namespace_is_valid("Com.Example/x"));
        assert!(!namespace_is_valid("example/x"));
        assert!(!namespace_is_valid("com.example/a/b"));
    }

    #[test]
    fn the_registry_digest_matches_the_published_value() {
        assert_eq!(
            registry_digest().to_tagged(),
            "sha-256:FG2f38K0hba8tTP7iUaw7vHjgcnN_5F5Mp0v4G6UDVs"
        );
    }
}
