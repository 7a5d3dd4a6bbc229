//! The agreement corpus: every instance is judged by the normative schema (jsonschema), by this
//! project's generated schema, and by the typed decoder (schema-layer verdict); `boon` independently
//! confirms each normative verdict. All must agree with the instance's expected verdict.
//!
//! The corpus is built from the normative `$defs` (spec Appendix A): for every body type and every
//! schema-file type, valid instances cycle through every union variant and enum value with every
//! member present, plus a required-only instance, an all-optional-null instance (spec 5.4) and an
//! integral-float instance; invalid instances are single, targeted defects (unknown member, each
//! required member missing, a wrong type or forbidden null for each member, an unknown enum value, a
//! negative or fractional integer, an unknown member in a nested closed object, a non-object root).
//! Hand-written spec examples (`corpus/examples.json`) are judged the same way.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use aip_core::MessageType;
use serde_json::{Map, Value, json};

fn shared_dir() -> Option<PathBuf> {
    if let Ok(d) = std::env::var("AIP_SHARED_DIR") {
        let p = PathBuf::from(d);
        return p.join("aip-schemas").is_dir().then_some(p);
    }
    let mut dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    loop {
        if dir.join("Cargo.lock").is_file() {
            let p = dir.parent()?.join("shared");
            return p.join("aip-schemas").is_dir().then_some(p);
        }
        dir = dir.parent()?.to_path_buf();
    }
}

fn load(shared: &std::path::Path, file: &str) -> Value {
    let text = std::fs::read_to_string(shared.join("aip-schemas").join(file)).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// One corpus instance of type `def` (a `$defs` name).
#[derive(Clone)]
struct Instance {
    def: String,
    label: String,
    value: Value,
    expected: bool,
}

/// Builds instances of a `$defs` type from the normative definitions.
struct Gen<'a> {
    defs: &'a Map<String, Value>,
}

const TS: &str = "2026-07-14T08:30:00Z";

impl Gen<'_> {
    fn resolve<'s>(&'s self, s: &'s Value) -> &'s Value {
        match s.get("$ref").and_then(Value::as_str) {
            Some(r) => &self.defs[r.rsplit('/').next().unwrap()],
            None => s,
        }
    }

    /// A valid value for schema `s`; `choice` selects union variants and enum values; `full` keeps
    /// optional members down to `depth` 3.
    fn value(&self, name: &str, s: &Value, choice: usize, full: bool, depth: usize) -> Value {
        let s = self.resolve(s);
        if let Some(c) = s.get("const") {
            return c.clone();
        }
        if let Some(any) = s.get("anyOf").and_then(Value::as_array) {
            let non_null: Vec<&Value> = any
                .iter()
                .filter(|a| a.get("type") != Some(&json!("null")))
                .collect();
            return self.value(name, non_null[choice % non_null.len()], choice, full, depth);
        }
        if let Some(one) = s.get("oneOf").and_then(Value::as_array) {
            return self.value(name, &one[choice % one.len()], choice, full, depth);
        }
        let ty = match s.get("type") {
            Some(Value::String(t)) => t.clone(),
            Some(Value::Array(ts)) => ts
                .iter()
                .filter_map(Value::as_str)
                .find(|t| *t != "null")
                .unwrap()
                .to_owned(),
            _ => return self.any(name),
        };
        match ty.as_str() {
            "string" => self.string(name),
            "integer" => json!(5),
            "number" => json!(0.5),
            "boolean" => json!(true),
            "array" => match s.get("items") {
                Some(Value::Bool(true)) | None => json!([{"k": "v"}]),
                Some(items) => {
                    if depth > 4 {
                        json!([])
                    } else {
                        json!([self.value(name, items, choice, full, depth + 1)])
                    }
                }
            },
            "object" => self.object(s, choice, full, depth),
            other => panic!("unhandled type {other}"),
        }
    }

    fn any(&self, name: &str) -> Value {
        match name {
            "input_schema" | "output_schema" => json!({"type": "object"}),
            _ => json!({"k": "v", "signature": "app"}),
        }
    }

    fn string(&self, name: &str) -> Value {
        if name.ends_with("_at") || matches!(name, "reconcile_after" | "from" | "to") {
            return json!(TS);
        }
        match name {
            "manifest_version" => json!("aip-manifest/v1"),
            _ => json!(format!("x-{name}")),
        }
    }

    fn object(&self, s: &Value, choice: usize, full: bool, depth: usize) -> Value {
        let mut out = Map::new();
        let required = required(s);
        if let Some(props) = s.get("properties").and_then(Value::as_object) {
            for (k, ps) in props {
                let keep = required.contains(k) || (full && depth < 3);
                if keep {
                    out.insert(k.clone(), self.value(k, ps, choice, full, depth + 1));
                }
            }
        } else if let Some(ap) = s.get("additionalProperties").filter(|a| a.is_object()) {
            out.insert(
                "self".into(),
                self.value("self", ap, choice, full, depth + 1),
            );
        }
        Value::Object(out)
    }

    /// Largest union or enum reachable from `s`, so cycling `choice` visits every value.
    fn widest(&self, s: &Value, seen: &mut Vec<String>) -> usize {
        let mut w = 1;
        if let Some(r) = s.get("$ref").and_then(Value::as_str) {
            let n = r.rsplit('/').next().unwrap().to_owned();
            if seen.contains(&n) {
                return 1;
            }
            seen.push(n.clone());
            return self.widest(&self.defs[&n], seen);
        }
        match s {
            Value::Object(m) => {
                for (k, v) in m {
                    if k == "oneOf" {
                        w = w.max(v.as_array().map_or(1, Vec::len));
                    }
                    w = w.max(self.widest(v, seen));
                }
            }
            Value::Array(a) => {
                for v in a {
                    w = w.max(self.widest(v, seen));
                }
            }
            _ => {}
        }
        w
    }
}

fn required(s: &Value) -> Vec<String> {
    s.get("required")
        .and_then(Value::as_array)
        .map_or_else(Vec::new, |r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
}

/// Sets every member whose schema admits `null` to `null`, recursively (spec 5.4).
fn nullify(g: &Gen<'_>, s: &Value, v: &mut Value) {
    let s = g.resolve(s);
    let Some(props) = s.get("properties").and_then(Value::as_object) else {
        return;
    };
    let Some(obj) = v.as_object_mut() else { return };
    for (k, ps) in props {
        let Some(member) = obj.get_mut(k) else {
            continue;
        };
        if admits_null(ps) {
            *member = Value::Null;
        } else {
            nullify(g, ps, member);
        }
    }
}

fn admits_null(ps: &Value) -> bool {
    let t_null = ps
        .get("type")
        .and_then(Value::as_array)
        .is_some_and(|t| t.contains(&json!("null")));
    let any_null = ps
        .get("anyOf")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|x| x.get("type") == Some(&json!("null"))));
    t_null
        || any_null
        || ps.as_object().is_some_and(|o| {
            !o.contains_key("type")
                && !o.contains_key("$ref")
                && !o.contains_key("anyOf")
                && !o.contains_key("oneOf")
        })
}

/// Replaces integers with integral floats (`5` → `5.0`): JSON Schema `integer` admits them.
fn floatify(v: &mut Value) {
    match v {
        Value::Number(n) if n.is_u64() => *v = json!(n.as_u64().unwrap() as f64),
        Value::Array(a) => a.iter_mut().for_each(floatify),
        Value::Object(m) => m.values_mut().for_each(floatify),
        _ => {}
    }
}

/// The kind of member, to pick a wrong-typed replacement.
fn wrong_values(g: &Gen<'_>, ps: &Value) -> Vec<(&'static str, Value)> {
    let s = g.resolve(ps);
    let mut out = Vec::new();
    let base = if let Some(any) = s.get("anyOf").and_then(Value::as_array) {
        any.iter()
            .find(|a| a.get("type") != Some(&json!("null")))
            .map(|a| g.resolve(a))
            .unwrap()
            .clone()
    } else {
        s.clone()
    };
    let nullable = admits_null(ps);
    let ty = match base.get("type") {
        Some(Value::String(t)) => Some(t.as_str()),
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).find(|t| *t != "null"),
        _ => None,
    };
    let is_enum = base
        .get("oneOf")
        .and_then(Value::as_array)
        .is_some_and(|o| o.iter().all(|x| x.get("const").is_some()));
    let is_union = base.get("oneOf").is_some() && !is_enum;
    if is_enum {
        out.push(("unknown enum value", json!("not_a_registered_value")));
        out.push(("number for enum", json!(7)));
    } else if is_union {
        out.push(("string for tagged union", json!("x")));
        out.push((
            "unknown union variant",
            json!({"type": "nope", "operator": "nope", "nope": "x"}),
        ));
    } else {
        match ty {
            Some("string") => out.push(("number for string", json!(12))),
            Some("integer") => {
                out.push(("string for integer", json!("12")));
                out.push(("negative integer", json!(-1)));
                out.push(("fractional integer", json!(1.5)));
            }
            Some("number") => out.push(("string for number", json!("0.5"))),
            Some("boolean") => out.push(("string for boolean", json!("yes"))),
            Some("array") => out.push(("object for array", json!({}))),
            Some("object") => out.push(("string for object", json!("x"))),
            _ => {}
        }
    }
    if !nullable && ty.is_some() {
        out.push(("null for non-nullable member", Value::Null));
    }
    out
}

/// Every instance of one `$defs` type.
fn instances_of(g: &Gen<'_>, def: &str) -> Vec<Instance> {
    let s = &g.defs[def];
    let mut out = Vec::new();
    let mut push = |label: String, value: Value, expected: bool| {
        out.push(Instance {
            def: def.to_owned(),
            label,
            value,
            expected,
        });
    };
    let width = g.widest(s, &mut vec![def.to_owned()]).max(4);
    for k in 0..width {
        push(
            format!("full, choice {k}"),
            g.value(def, s, k, true, 0),
            true,
        );
    }
    push(
        "required members only".into(),
        g.value(def, s, 0, false, 0),
        true,
    );
    let mut nulls = g.value(def, s, 1, true, 0);
    nullify(g, s, &mut nulls);
    push("optional members null (5.4)".into(), nulls, true);
    let mut floats = g.value(def, s, 2, true, 0);
    floatify(&mut floats);
    push("integers written as integral floats".into(), floats, true);

    let base = g.value(def, s, 0, true, 0);
    push(
        "array instead of object".into(),
        json!([base.clone()]),
        false,
    );
    push("string instead of object".into(), json!("x"), false);
    let mut unknown = base.clone();
    unknown
        .as_object_mut()
        .unwrap()
        .insert("zz_unknown_member".into(), json!(1));
    push("unknown member (closed object, 5.1)".into(), unknown, false);
    for r in required(s) {
        let mut v = base.clone();
        v.as_object_mut().unwrap().remove(&r);
        push(format!("required `{r}` missing"), v, false);
    }
    let props = s
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for (k, ps) in &props {
        for (what, bad) in wrong_values(g, ps) {
            let mut v = base.clone();
            v.as_object_mut().unwrap().insert(k.clone(), bad);
            push(format!("`{k}`: {what}"), v, false);
        }
    }
    // An unknown member inside the first nested closed object.
    for (k, ps) in &props {
        let target = g.resolve(ps);
        let target = match target.get("anyOf").and_then(Value::as_array) {
            Some(a) => g.resolve(
                a.iter()
                    .find(|x| x.get("type") != Some(&json!("null")))
                    .unwrap(),
            ),
            None => target,
        };
        if target.get("additionalProperties") == Some(&json!(false)) && base[k].is_object() {
            let mut v = base.clone();
            v[k].as_object_mut()
                .unwrap()
                .insert("zz_nested_unknown".into(), json!(true));
            push(format!("unknown member inside `{k}`"), v, false);
            break;
        }
    }
    out
}

/// Validator pairs: jsonschema and boon over the same normative document.
struct Normative {
    js: jsonschema::Validator,
    boon: (boon::Schemas, boon::SchemaIndex),
}

impl Normative {
    fn new(doc: &Value) -> Self {
        let js = jsonschema::draft202012::new(doc).unwrap();
        let url = doc["$id"].as_str().unwrap().to_owned();
        let mut schemas = boon::Schemas::new();
        let mut c = boon::Compiler::new();
        c.add_resource(&url, doc.clone()).unwrap();
        let idx = c.compile(&url, &mut schemas).unwrap();
        Self {
            js,
            boon: (schemas, idx),
        }
    }

    fn judge(&self, v: &Value) -> (bool, bool) {
        (
            self.js.is_valid(v),
            self.boon.0.validate(v, self.boon.1).is_ok(),
        )
    }
}

fn wrap(mt: MessageType, body: &Value) -> Value {
    json!({
        "aip_version": "1.0",
        "message_type": mt.as_str(),
        "message_id": "msg_corpus",
        "sent_at": TS,
        "body": { mt.body_key(): body }
    })
}

#[derive(Default)]
struct Row {
    verdicts: BTreeMap<&'static str, bool>,
}

#[test]
fn normative_generated_and_typed_verdicts_agree_on_every_corpus_instance() {
    let Some(shared) = shared_dir() else {
        println!("SKIP: ../shared/aip-schemas not found (set AIP_SHARED_DIR)");
        return;
    };
    let envelope_doc = load(&shared, "envelope.schema.json");
    let defs = envelope_doc["$defs"].as_object().unwrap().clone();
    let g = Gen { defs: &defs };

    // Normative validators: the envelope plus every file.
    let norm_env = Normative::new(&envelope_doc);
    let mut norm_files = BTreeMap::new();
    let generated = aip_schema::Validators::new().unwrap();
    for f in aip_schema::FILES {
        norm_files.insert(f.stem, Normative::new(&load(&shared, &f.file_name())));
    }

    // Which def each body key and each file holds.
    let mut by_def: BTreeMap<String, (Option<MessageType>, Option<&'static str>)> = BTreeMap::new();
    for mt in MessageType::ALL {
        by_def.entry(mt.body_type_name().to_owned()).or_default().0 = Some(*mt);
    }
    for f in aip_schema::FILES.iter().filter(|f| f.stem != "envelope") {
        by_def.entry(f.title.to_owned()).or_default().1 = Some(f.stem);
    }

    let mut corpus: Vec<Instance> = Vec::new();
    for def in by_def.keys() {
        corpus.extend(instances_of(&g, def));
    }
    corpus.extend(examples(&shared));

    let mut disagreements: Vec<(Instance, Row)> = Vec::new();
    let mut per_def: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for inst in &corpus {
        let mut row = Row::default();
        if inst.def == "Envelope" {
            let (js, bn) = norm_env.judge(&inst.value);
            row.verdicts.insert("normative envelope (jsonschema)", js);
            row.verdicts.insert("normative envelope (boon)", bn);
            row.verdicts.insert(
                "generated envelope",
                generated.is_valid("envelope", &inst.value).unwrap(),
            );
            let typed = aip_schema::file("envelope").unwrap().decode(&inst.value);
            row.verdicts.insert(
                "typed decoder (envelope)",
                typed.map_or_else(|e| !e.is_schema_layer(), |()| true),
            );
        } else {
            let (mt, stem) = by_def[&inst.def];
            if let Some(mt) = mt {
                let env = wrap(mt, &inst.value);
                let (js, bn) = norm_env.judge(&env);
                row.verdicts.insert("normative envelope (jsonschema)", js);
                row.verdicts.insert("normative envelope (boon)", bn);
                row.verdicts.insert(
                    "generated envelope",
                    generated.is_valid("envelope", &env).unwrap(),
                );
                let typed = aip_schema::file("envelope").unwrap().decode(&env);
                row.verdicts.insert(
                    "typed decoder (envelope)",
                    typed.map_or_else(|e| !e.is_schema_layer(), |()| true),
                );
            }
            if let Some(stem) = stem {
                let (js, bn) = norm_files[stem].judge(&inst.value);
                row.verdicts.insert("normative file (jsonschema)", js);
                row.verdicts.insert("normative file (boon)", bn);
                row.verdicts.insert(
                    "generated file",
                    generated.is_valid(stem, &inst.value).unwrap(),
                );
                let typed = aip_schema::file(stem).unwrap().decode(&inst.value);
                row.verdicts.insert(
                    "typed decoder (file)",
                    typed.map_or_else(|e| !e.is_schema_layer(), |()| true),
                );
            }
        }
        let counts = per_def.entry(inst.def.clone()).or_default();
        if inst.expected {
            counts.0 += 1;
        } else {
            counts.1 += 1;
        }
        if row.verdicts.values().any(|v| *v != inst.expected) {
            disagreements.push((inst.clone(), row));
        }
    }

    let valid = corpus.iter().filter(|i| i.expected).count();
    println!(
        "agreement corpus: {} instances ({} valid, {} invalid) over {} types; {} disagreements",
        corpus.len(),
        valid,
        corpus.len() - valid,
        per_def.len(),
        disagreements.len()
    );
    for (def, (v, i)) in &per_def {
        assert!(
            *v >= 4 && *i >= 4,
            "{def} has only {v} valid / {i} invalid instances"
        );
    }
    assert_eq!(
        per_def.len(),
        65,
        "58 message bodies + 6 other file types + the envelope"
    );
    if !disagreements.is_empty() {
        println!("{:<28} | {:<48} | expected | verdicts", "type", "instance");
        for (inst, row) in disagreements.iter().take(60) {
            let verdicts: Vec<String> = row
                .verdicts
                .iter()
                .map(|(k, v)| format!("{k}={}", if *v { "valid" } else { "invalid" }))
                .collect();
            println!(
                "{:<28} | {:<48} | {:<8} | {}",
                inst.def,
                inst.label,
                if inst.expected { "valid" } else { "invalid" },
                verdicts.join(", ")
            );
            println!("    {}", inst.value);
        }
        panic!(
            "{} of {} instances disagree (table above)",
            disagreements.len(),
            corpus.len()
        );
    }
}

/// Hand-written instances from the spec text (`tests/corpus/examples.json`): envelopes and bodies with
/// their expected schema verdict.
fn examples(_shared: &std::path::Path) -> Vec<Instance> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/examples.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc.as_array()
        .unwrap()
        .iter()
        .map(|e| Instance {
            def: e["type"].as_str().unwrap().to_owned(),
            label: e["label"].as_str().unwrap().to_owned(),
            value: e["instance"].clone(),
            expected: e["valid"].as_bool().unwrap(),
        })
        .collect()
}
