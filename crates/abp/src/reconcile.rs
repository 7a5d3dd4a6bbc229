//! Evidence and reconcile (spec 13): the one composed non-authorizing pass per import, in the pinned
//! stage order canonical → digest → negotiation → structure → portability → signatures → bind →
//! bounds. The result is evidence, never a decision; `not_verified` is non-empty by construction.

use crate::blueprint::{self, Blueprint};
use crate::bounds::{self, BoundSet, Clamp, Posture};
use crate::deployment::{self, BindingContext, Deployment};
use crate::error::{Code, Error, Result};
use crate::extension::{self, Support};
use crate::json::{self, DecodeBounds, Object, Value};
use crate::portability;
use crate::signature::{Entry, HostKey};

/// The host-owned surfaces this protocol structurally cannot establish (spec 13).
pub const HOST_OWNED: [&str; 7] = [
    "tenancy",
    "live_policy",
    "authority",
    "effect_ownership",
    "execution",
    "billing",
    "evaluation_truth",
];

/// The reconcile stages in pinned order.
pub const STAGES: [&str; 8] = [
    "canonical",
    "digest",
    "negotiation",
    "structure",
    "portability",
    "signatures",
    "bind",
    "bounds",
];

/// Host inputs to reconcile.
#[derive(Debug, Clone)]
pub struct ReconcileInputs {
    /// Trusted public keys (the package performs no key discovery).
    pub keys: Vec<HostKey>,
    /// Host policy bounds; `None` uses the deployment's `host_bounds`.
    pub host_bounds: Option<BoundSet>,
    /// Consumer support for negotiation.
    pub support: Support,
    /// Protected-bound posture.
    pub posture: Posture,
    /// Binding freshness and observed descriptors.
    pub binding: BindingContext,
    /// Parse ceilings for both artifacts.
    pub bounds: DecodeBounds,
}

impl Default for ReconcileInputs {
    fn default() -> Self {
        ReconcileInputs {
            keys: vec![],
            host_bounds: None,
            support: Support::current(),
            posture: Posture::Deny,
            binding: BindingContext::default(),
            bounds: DecodeBounds::MAX,
        }
    }
}

/// One per-surface check result.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// The stage.
    pub stage: &'static str,
    /// `blueprint`, `deployment` or `pair`.
    pub artifact: &'static str,
    /// `Ok` when the check passed, else the deny.
    pub outcome: std::result::Result<(), Error>,
}

/// The set of what was not established: always the seven host-owned surfaces, plus any stage that
/// did not run or had nothing to verify. Non-empty by construction: the type has no empty value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotVerified {
    extra: Vec<String>,
}

impl NotVerified {
    fn new() -> Self {
        NotVerified { extra: vec![] }
    }

    fn add(&mut self, what: impl Into<String>) {
        let what = what.into();
        if !self.extra.contains(&what) {
            self.extra.push(what);
        }
    }

    /// Every name, host-owned surfaces first.
    pub fn names(&self) -> Vec<String> {
        HOST_OWNED
            .iter()
            .map(|s| (*s).to_owned())
            .chain(self.extra.iter().cloned())
            .collect()
    }
}

/// The evidence record of one reconcile.
#[derive(Debug, Clone, PartialEq)]
pub struct Evidence {
    /// Per-surface checks in stage order.
    pub checks: Vec<Check>,
    /// Effective bounds, when the bounds stage ran.
    pub effective: Option<BoundSet>,
    /// Clamp evidence.
    pub clamps: Vec<Clamp>,
    not_verified: NotVerified,
}

impl Evidence {
    /// What this evidence does not establish.
    pub fn not_verified(&self) -> Vec<String> {
        self.not_verified.names()
    }

    /// The first denying check, if any.
    pub fn denial(&self) -> Option<&Error> {
        self.checks.iter().find_map(|c| c.outcome.as_ref().err())
    }

    /// The record as JSON (for `aip abp verify`).
    pub fn to_value(&self) -> Value {
        let checks = self
            .checks
            .iter()
            .map(|c| {
                let mut o = Object::new();
                o.insert("artifact", Value::string(c.artifact));
                o.insert("surface", Value::string(c.stage));
                o.insert("verified", Value::Bool(c.outcome.is_ok()));
                if let Err(e) = &c.outcome {
                    o.insert("code", Value::string(e.code.as_str()));
                    o.insert("subject", Value::string(e.subject.clone()));
                }
                Value::Object(o)
            })
            .collect();
        let clamps = self
            .clamps
            .iter()
            .map(|c| {
                let mut o = Object::new();
                o.insert("bound", Value::string(c.bound));
                o.insert("effective", c.effective.clone());
                o.insert("protected", Value::Bool(c.protected));
                o.insert("requested", c.requested.clone());
                Value::Object(o)
            })
            .collect();
        let mut o = Object::new();
        o.insert("checks", Value::Array(checks));
        o.insert("clamps", Value::Array(clamps));
        o.insert(
            "effective_bounds",
            self.effective
                .as_ref()
                .map_or(Value::Null, BoundSet::to_value),
        );
        o.insert(
            "not_verified",
            Value::Array(self.not_verified().into_iter().map(Value::String).collect()),
        );
        Value::Object(o)
    }
}

struct Run {
    ev: Evidence,
}

impl Run {
    /// Record a check; `false` when it denied (reconcile stops: fail closed).
    fn record(&mut self, stage: &'static str, artifact: &'static str, outcome: Result<()>) -> bool {
        let ok = outcome.is_ok();
        self.ev.checks.push(Check {
            stage,
            artifact,
            outcome,
        });
        ok
    }

    fn finish(mut self, from_stage: usize) -> Evidence {
        for s in &STAGES[from_stage..] {
            self.ev.not_verified.add(*s);
        }
        self.ev
    }
}

/// Reconcile a Blueprint and a Deployment (spec 13). Never panics; every deny is a check entry.
pub fn reconcile(
    blueprint_bytes: &[u8],
    deployment_bytes: &[u8],
    inputs: &ReconcileInputs,
) -> Evidence {
    let mut run = Run {
        ev: Evidence {
            checks: vec![],
            effective: None,
            clamps: vec![],
            not_verified: NotVerified::new(),
        },
    };
    let bp = json::decode_canonical(blueprint_bytes, &inputs.bounds);
    let dp = json::decode_canonical(deployment_bytes, &inputs.bounds);
    let ok_b = run.record(
        "canonical",
        "blueprint",
        bp.as_ref().map(|_| ()).map_err(Clone::clone),
    );
    let ok_d = run.record(
        "canonical",
        "deployment",
        dp.as_ref().map(|_| ()).map_err(Clone::clone),
    );
    let (Ok(bv), Ok(dv), true, true) = (bp, dp, ok_b, ok_d) else {
        return run.finish(1);
    };

    let db = blueprint::verify_digest(&bv);
    let dd = deployment::verify_digest(&dv);
    let ok_b = run.record(
        "digest",
        "blueprint",
        db.as_ref().map(|_| ()).map_err(Clone::clone),
    );
    let ok_d = run.record(
        "digest",
        "deployment",
        dd.as_ref().map(|_| ()).map_err(Clone::clone),
    );
    let (Ok(b_digest), Ok(d_digest), true, true) = (db, dd, ok_b, ok_d) else {
        return run.finish(2);
    };
    let ok_b = run.record(
        "negotiation",
        "blueprint",
        extension::negotiate(&bv, &inputs.support).map(|_| ()),
    );
    let ok_d = run.record(
        "negotiation",
        "deployment",
        extension::negotiate(&dv, &inputs.support).map(|_| ()),
    );
    if !(ok_b && ok_d) {
        return run.finish(3);
    }
    let ok_b = run.record("structure", "blueprint", blueprint::check_structure(&bv));
    let ok_d = run.record("structure", "deployment", deployment::check_structure(&dv));
    if !(ok_b && ok_d) {
        return run.finish(4);
    }
    let ok_b = run.record(
        "portability",
        "blueprint",
        portability::scan(&bv, &["extensions"]),
    );
    let ok_d = run.record(
        "portability",
        "deployment",
        portability::scan(&dv, &["extensions"]),
    );
    if !(ok_b && ok_d) {
        return run.finish(5);
    }
    // Every decode check has passed as a stage above: assemble the typed artifacts from the parts.
    let (Some(b), Some(d)) = (
        Blueprint::from_checked(blueprint_bytes, bv, b_digest),
        Deployment::from_checked(deployment_bytes, dv, d_digest),
    ) else {
        return run.finish(5);
    };
    let sb = verify_signatures(
        b.value(),
        "blueprint",
        &b.content_digest().to_tagged(),
        &inputs.keys,
    );
    let sd = verify_signatures(
        d.value(),
        "deployment",
        &d.deployment_digest().to_tagged(),
        &inputs.keys,
    );
    for (artifact, result) in [("blueprint", &sb), ("deployment", &sd)] {
        if matches!(result, Ok(0)) {
            run.ev.not_verified.add(format!("{artifact}_signatures"));
        }
    }
    let ok_b = run.record("signatures", "blueprint", sb.map(|_| ()));
    let ok_d = run.record("signatures", "deployment", sd.map(|_| ()));
    if !(ok_b && ok_d) {
        return run.finish(6);
    }
    if !run.record(
        "bind",
        "pair",
        deployment::verify_binding(&d, &b, &inputs.binding),
    ) {
        return run.finish(7);
    }
    let host_bounds = d.value().get("host_bounds").cloned().unwrap_or(Value::Null);
    let outcome = (|| -> Result<bounds::Intersection> {
        let requested = bounds::from_blueprint(b.value(), &host_bounds)?;
        let deployment_set = BoundSet::from_value(&host_bounds, "host_bounds")?;
        let host = inputs
            .host_bounds
            .clone()
            .unwrap_or_else(|| deployment_set.clone());
        bounds::intersect(&requested, &deployment_set, &host, inputs.posture)
    })();
    match outcome {
        Ok(i) => {
            run.ev.effective = Some(i.effective);
            run.ev.clamps = i.clamps;
            run.record("bounds", "pair", Ok(()));
        }
        Err(e) => {
            run.record("bounds", "pair", Err(e));
        }
    }
    run.finish(STAGES.len())
}

/// Verify every signature of one artifact: the JWS with a host key, the purpose and the signed
/// content digest. Returns how many signatures verified.
fn verify_signatures(o: &Object, purpose: &str, digest: &str, keys: &[HostKey]) -> Result<usize> {
    let sigs = o
        .get("signatures")
        .and_then(Value::as_array)
        .unwrap_or_default();
    for s in sigs {
        let entry = Entry::parse(s)?;
        entry.verify(keys)?;
        if entry.purpose() != purpose || entry.content_digest().to_tagged() != digest {
            return Err(Error::new(Code::SignatureNotVerified, "signatures"));
        }
    }
    Ok(sigs.len())
}
