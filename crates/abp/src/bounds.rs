//! The bounds algebra (spec 9): operational bounds meet pointwise at the narrowest value with clamp
//! evidence; protected bounds are ordinal lattices (classification and disclosure ceilings meet at
//! the lowest, the obligation families authority, approval and effect impact at the strictest),
//! classification markers meet as a set union, and any protected change denies unless the host
//! opts into the acknowledge posture, which always records evidence.

use std::collections::BTreeSet;

use crate::blueprint::{APPROVAL, AUTHORITY, CLASSIFICATION, IMPACT};
use crate::error::{Code, Error, Result};
use crate::json::{Object, Value};

/// The seven integer operational bounds (the eighth, `max_cost`, carries a currency).
pub const OPERATIONAL: [&str; 7] = [
    "max_attempts",
    "max_concurrency",
    "max_depth",
    "max_descendants",
    "max_elapsed_ms",
    "max_fan_out",
    "max_tokens",
];
/// Disclosure ceiling lattice, lowest first.
pub const DISCLOSURE: &[&str] = &["none", "summary", "detail", "full"];
/// Classification markers (set-monotone regulatory obligations).
pub const MARKERS: &[&str] = &["pci", "phi"];

/// The five protected bounds: (name, lattice lowest-first, meets at the strictest = highest).
const PROTECTED: [(&str, &[&str], bool); 5] = [
    ("classification_ceiling", CLASSIFICATION, false),
    ("disclosure_ceiling", DISCLOSURE, false),
    ("effect_impact_ceiling", IMPACT, true),
    ("authority_trait", AUTHORITY, true),
    ("approval_trait", APPROVAL, true),
];

/// A cost bound.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Cost {
    /// Positive amount.
    pub amount: i64,
    /// Currency code; costs in different currencies never meet.
    pub currency: String,
}

/// One complete bound set: all 8 operational and all 5 protected bounds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BoundSet {
    /// The seven integer operational bounds, in [`OPERATIONAL`] order.
    pub operational: [i64; 7],
    /// `max_cost`.
    pub max_cost: Cost,
    /// Protected ordinals, in lattice index form, in the spec 9 order (classification, disclosure,
    /// effect impact, authority, approval).
    pub protected: [usize; 5],
    /// Classification markers.
    pub markers: BTreeSet<&'static str>,
}

/// Whether narrowing a protected bound denies or is acknowledged with evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Posture {
    /// Deny `protected_bound_clamp_denied` (the default).
    #[default]
    Deny,
    /// Accept and record a protected clamp.
    Acknowledge,
}

/// Evidence that an effective bound differs from the requested (blueprint) bound.
#[derive(Debug, Clone, PartialEq)]
pub struct Clamp {
    /// The bound's name.
    pub bound: &'static str,
    /// Requested value.
    pub requested: Value,
    /// Effective value.
    pub effective: Value,
    /// Whether this is an acknowledged protected clamp.
    pub protected: bool,
}

/// The result of intersecting the three sources.
#[derive(Debug, Clone, PartialEq)]
pub struct Intersection {
    /// The effective bounds.
    pub effective: BoundSet,
    /// One clamp per bound whose effective value differs from the requested one.
    pub clamps: Vec<Clamp>,
}

impl BoundSet {
    /// Parse a bound set. Order: protected bounds (absent or mistyped → `invalid_type`, off-lattice
    /// → `bound_value_invalid`), operational (absent → `missing_ceiling`, mistyped → `invalid_type`,
    /// below 1 → `bound_value_invalid`), then unknown names (`bound_unknown`).
    pub fn from_value(v: &Value, subject: &str) -> Result<BoundSet> {
        let o = v
            .as_object()
            .ok_or_else(|| Error::new(Code::InvalidType, subject))?;
        let at = |k: &str| format!("{subject}.{k}");
        let mut protected = [0usize; 5];
        let mut markers = BTreeSet::new();
        for (i, (name, lattice, _)) in PROTECTED.iter().enumerate() {
            let raw = o
                .get(name)
                .ok_or_else(|| Error::new(Code::InvalidType, at(name)))?;
            let ordinal = if i == 0 {
                match raw {
                    Value::String(s) => s.as_str(),
                    Value::Object(c) => {
                        let ord = c.get("ordinal").and_then(Value::as_str);
                        let ms = c.get("markers").and_then(Value::as_array);
                        let (Some(ord), Some(ms), 2) = (ord, ms, c.len()) else {
                            return Err(Error::new(Code::InvalidType, at(name)));
                        };
                        for m in ms {
                            let m = m
                                .as_str()
                                .ok_or_else(|| Error::new(Code::InvalidType, at(name)))?;
                            let known = MARKERS.iter().find(|k| **k == m);
                            markers
                                .insert(*known.ok_or_else(|| {
                                    Error::new(Code::BoundValueInvalid, at(name))
                                })?);
                        }
                        ord
                    }
                    _ => return Err(Error::new(Code::InvalidType, at(name))),
                }
            } else {
                raw.as_str()
                    .ok_or_else(|| Error::new(Code::InvalidType, at(name)))?
            };
            protected[i] = lattice
                .iter()
                .position(|l| *l == ordinal)
                .ok_or_else(|| Error::new(Code::BoundValueInvalid, at(name)))?;
        }
        let mut operational = [0i64; 7];
        for (i, name) in OPERATIONAL.iter().enumerate() {
            let raw = o
                .get(name)
                .ok_or_else(|| Error::new(Code::MissingCeiling, at(name)))?;
            let n = raw
                .as_int()
                .ok_or_else(|| Error::new(Code::InvalidType, at(name)))?;
            if n < 1 {
                return Err(Error::new(Code::BoundValueInvalid, at(name)));
            }
            operational[i] = n;
        }
        let cost = o
            .get("max_cost")
            .ok_or_else(|| Error::new(Code::MissingCeiling, at("max_cost")))?;
        let max_cost = parse_cost(cost, &at("max_cost"))?;
        if let Some(k) = o.keys().find(|k| !is_bound_name(k)) {
            return Err(Error::new(Code::BoundUnknown, at(k)));
        }
        Ok(BoundSet {
            operational,
            max_cost,
            protected,
            markers,
        })
    }

    /// The meet (spec 9): narrowest operational values, lowest ceilings, strictest obligations,
    /// union of markers. Costs in different currencies deny `bound_unit_mismatch`.
    pub fn meet(&self, other: &BoundSet) -> Result<BoundSet> {
        if self.max_cost.currency != other.max_cost.currency {
            return Err(Error::new(Code::BoundUnitMismatch, "max_cost.currency"));
        }
        let mut out = self.clone();
        for i in 0..7 {
            out.operational[i] = self.operational[i].min(other.operational[i]);
        }
        out.max_cost.amount = self.max_cost.amount.min(other.max_cost.amount);
        for (i, (_, _, strictest)) in PROTECTED.iter().enumerate() {
            out.protected[i] = if *strictest {
                self.protected[i].max(other.protected[i])
            } else {
                self.protected[i].min(other.protected[i])
            };
        }
        out.markers.extend(other.markers.iter().copied());
        Ok(out)
    }

    /// Whether `self` is wider than `host` anywhere (spec 9: effective never widens host policy).
    pub fn widens(&self, host: &BoundSet) -> bool {
        (0..7).any(|i| self.operational[i] > host.operational[i])
            || self.max_cost.amount > host.max_cost.amount
            || PROTECTED.iter().enumerate().any(|(i, (_, _, strictest))| {
                if *strictest {
                    self.protected[i] < host.protected[i]
                } else {
                    self.protected[i] > host.protected[i]
                }
            })
            || !host.markers.is_subset(&self.markers)
    }

    /// The set as the corpus projects it (classification as `{markers, ordinal}`).
    pub fn to_value(&self) -> Value {
        let mut o = Object::new();
        for (i, name) in OPERATIONAL.iter().enumerate() {
            o.insert(*name, Value::int(self.operational[i]));
        }
        o.insert("max_cost", cost_value(&self.max_cost));
        for (i, (name, _, _)) in PROTECTED.iter().enumerate() {
            o.insert(*name, self.protected_value(i));
        }
        Value::Object(o)
    }

    fn protected_value(&self, i: usize) -> Value {
        let label = Value::string(
            PROTECTED[i]
                .1
                .get(self.protected[i])
                .copied()
                .unwrap_or("out_of_lattice"),
        );
        if i != 0 {
            return label;
        }
        let mut c = Object::new();
        c.insert(
            "markers",
            Value::Array(self.markers.iter().map(|m| Value::string(*m)).collect()),
        );
        c.insert("ordinal", label);
        Value::Object(c)
    }
}

fn is_bound_name(k: &str) -> bool {
    OPERATIONAL.contains(&k) || k == "max_cost" || PROTECTED.iter().any(|(n, _, _)| *n == k)
}

fn parse_cost(v: &Value, subject: &str) -> Result<Cost> {
    let o = v
        .as_object()
        .ok_or_else(|| Error::new(Code::InvalidType, subject))?;
    let amount = o
        .get("amount")
        .and_then(Value::as_int)
        .ok_or_else(|| Error::new(Code::InvalidType, subject))?;
    let currency = o
        .get("currency")
        .and_then(Value::as_str)
        .ok_or_else(|| Error::new(Code::InvalidType, subject))?;
    if amount < 1 || currency.is_empty() || o.len() != 2 {
        return Err(Error::new(Code::BoundValueInvalid, subject));
    }
    Ok(Cost {
        amount,
        currency: currency.to_owned(),
    })
}

fn cost_value(c: &Cost) -> Value {
    let mut o = Object::new();
    o.insert("amount", Value::int(c.amount));
    o.insert("currency", Value::string(c.currency.clone()));
    Value::Object(o)
}

/// Intersect the blueprint (requested), deployment and host sources (spec 9).
pub fn intersect(
    blueprint: &BoundSet,
    deployment: &BoundSet,
    host: &BoundSet,
    posture: Posture,
) -> Result<Intersection> {
    let effective = blueprint.meet(deployment)?.meet(host)?;
    let mut clamps = Vec::new();
    for (i, name) in OPERATIONAL.iter().enumerate() {
        if effective.operational[i] != blueprint.operational[i] {
            clamps.push(Clamp {
                bound: name,
                requested: Value::int(blueprint.operational[i]),
                effective: Value::int(effective.operational[i]),
                protected: false,
            });
        }
    }
    if effective.max_cost != blueprint.max_cost {
        clamps.push(Clamp {
            bound: "max_cost",
            requested: cost_value(&blueprint.max_cost),
            effective: cost_value(&effective.max_cost),
            protected: false,
        });
    }
    for (i, (name, _, _)) in PROTECTED.iter().enumerate() {
        let changed = effective.protected[i] != blueprint.protected[i]
            || (i == 0 && effective.markers != blueprint.markers);
        if !changed {
            continue;
        }
        if posture == Posture::Deny {
            return Err(Error::new(Code::ProtectedBoundClampDenied, *name));
        }
        clamps.push(Clamp {
            bound: name,
            requested: blueprint.protected_value(i),
            effective: effective.protected_value(i),
            protected: true,
        });
    }
    Ok(Intersection { effective, clamps })
}

/// The blueprint's requested bound set: its ceilings and classification, with the obligation
/// families derived as the strictest over its capabilities and effect intents. The blueprint
/// declares no disclosure ceiling, so it requests the deployment's.
pub fn from_blueprint(blueprint: &Object, deployment_host_bounds: &Value) -> Result<BoundSet> {
    let mut o = blueprint
        .get("ceilings")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let strictest = |lattice: &[&'static str], key: &str, members: &[&str]| -> &'static str {
        let idx = members
            .iter()
            .flat_map(|m| {
                blueprint
                    .get(m)
                    .and_then(Value::as_array)
                    .unwrap_or_default()
            })
            .filter_map(|c| c.get(key).and_then(Value::as_str))
            .filter_map(|v| lattice.iter().position(|l| *l == v))
            .max()
            .unwrap_or(0);
        lattice[idx]
    };
    o.insert(
        "classification_ceiling",
        blueprint
            .get("classification_ceiling")
            .cloned()
            .unwrap_or(Value::Null),
    );
    o.insert(
        "disclosure_ceiling",
        deployment_host_bounds
            .get("disclosure_ceiling")
            .cloned()
            .unwrap_or(Value::Null),
    );
    o.insert(
        "effect_impact_ceiling",
        Value::string(strictest(
            IMPACT,
            "impact_class",
            &["capability_requirements", "effect_intents"],
        )),
    );
    o.insert(
        "authority_trait",
        Value::string(strictest(
            AUTHORITY,
            "authority_trait",
            &["capability_requirements"],
        )),
    );
    o.insert(
        "approval_trait",
        Value::string(strictest(
            APPROVAL,
            "approval_trait",
            &["capability_requirements"],
        )),
    );
    BoundSet::from_value(&Value::Object(o), "blueprint")
}
