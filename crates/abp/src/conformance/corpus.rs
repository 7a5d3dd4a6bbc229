//! The corpus loader (spec 15, notes 4 and 6): pure over a `{path → bytes}` map, checking canonical
//! index bytes, the corpus and registry digests, the file set in both directions, per-file hashes,
//! counts, unique ids, case validity with tamper re-derivation, and the applicability floor.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::base64url;
use crate::digest::{Digest, Domain};
use crate::error::{Code, Error, Result};
use crate::extension;
use crate::jcs;
use crate::json::{self, DecodeBounds, Object, Value};

/// The index file name.
pub const INDEX: &str = "index.json";
const INDEX_FORMAT: &str = "agent-blueprint-protocol-conformance-corpus-index";
const CASES_FORMAT: &str = "agent-blueprint-protocol-conformance-cases";

/// The 16 surfaces.
pub const SURFACES: [&str; 16] = [
    "base64url.decode",
    "blueprint.decode",
    "bounds.new",
    "bounds_algebra.intersect",
    "canonicalization.encode",
    "compatibility.verify",
    "deployment.decode",
    "digest.tagged",
    "extension.resolve",
    "federation.decode",
    "federation.verify_commitment",
    "json.decode",
    "negotiation.negotiate",
    "portability.scan",
    "schema.validate_instance",
    "signature.verify",
];

/// The 31 case classes.
pub const CLASSES: [&str; 31] = [
    "audience_mismatch",
    "binding_stale",
    "bound_widening_operational",
    "bound_widening_protected",
    "boundary_near",
    "compatibility_range_rejected",
    "digest_mismatch",
    "exact_bound",
    "extension_criticality_conflict",
    "extension_deprecated_retained",
    "extension_schema_unavailable",
    "extension_unknown_critical",
    "extension_unknown_optional_roundtrip",
    "federation_state_unmappable",
    "federation_terminal_conflict",
    "forbidden_portable_value",
    "invalid_cardinality",
    "invalid_constraint",
    "invalid_duplicate",
    "invalid_encoding",
    "invalid_type",
    "maximum_plus_one",
    "required_field_not_covered",
    "required_field_unsupported",
    "revision_above_max",
    "revision_below_min",
    "signature_invalid",
    "tamper_meaningful_byte",
    "terminal_equivocation",
    "unknown_member",
    "valid",
];

/// The compiled applicability floor: the cells each surface must cover with at least one case.
pub const FLOOR: [(&str, &[&str]); 16] = [
    (
        "base64url.decode",
        &["exact_bound", "invalid_encoding", "valid"],
    ),
    (
        "blueprint.decode",
        &[
            "forbidden_portable_value",
            "invalid_cardinality",
            "invalid_constraint",
            "invalid_type",
            "maximum_plus_one",
            "tamper_meaningful_byte",
            "unknown_member",
            "valid",
        ],
    ),
    (
        "bounds.new",
        &["exact_bound", "invalid_type", "maximum_plus_one", "valid"],
    ),
    (
        "bounds_algebra.intersect",
        &[
            "bound_widening_operational",
            "bound_widening_protected",
            "invalid_constraint",
            "invalid_type",
            "valid",
        ],
    ),
    (
        "canonicalization.encode",
        &[
            "boundary_near",
            "exact_bound",
            "invalid_encoding",
            "maximum_plus_one",
            "tamper_meaningful_byte",
            "valid",
        ],
    ),
    (
        "compatibility.verify",
        &[
            "compatibility_range_rejected",
            "invalid_constraint",
            "valid",
        ],
    ),
    (
        "deployment.decode",
        &[
            "binding_stale",
            "compatibility_range_rejected",
            "digest_mismatch",
            "forbidden_portable_value",
            "invalid_cardinality",
            "invalid_constraint",
            "invalid_type",
            "maximum_plus_one",
            "tamper_meaningful_byte",
            "unknown_member",
            "valid",
        ],
    ),
    (
        "digest.tagged",
        &[
            "digest_mismatch",
            "invalid_encoding",
            "tamper_meaningful_byte",
            "valid",
        ],
    ),
    (
        "extension.resolve",
        &[
            "extension_criticality_conflict",
            "extension_deprecated_retained",
            "extension_unknown_critical",
            "extension_unknown_optional_roundtrip",
            "forbidden_portable_value",
            "invalid_constraint",
            "valid",
        ],
    ),
    (
        "federation.decode",
        &[
            "federation_state_unmappable",
            "forbidden_portable_value",
            "invalid_type",
            "unknown_member",
            "valid",
        ],
    ),
    (
        "federation.verify_commitment",
        &[
            "audience_mismatch",
            "federation_terminal_conflict",
            "signature_invalid",
            "terminal_equivocation",
            "valid",
        ],
    ),
    (
        "json.decode",
        &[
            "boundary_near",
            "exact_bound",
            "invalid_duplicate",
            "invalid_encoding",
            "invalid_type",
            "maximum_plus_one",
            "valid",
        ],
    ),
    (
        "negotiation.negotiate",
        &[
            "extension_criticality_conflict",
            "extension_schema_unavailable",
            "extension_unknown_critical",
            "invalid_cardinality",
            "invalid_constraint",
            "required_field_not_covered",
            "required_field_unsupported",
            "revision_above_max",
            "revision_below_min",
            "valid",
        ],
    ),
    ("portability.scan", &["forbidden_portable_value", "valid"]),
    (
        "schema.validate_instance",
        &[
            "invalid_cardinality",
            "invalid_constraint",
            "invalid_type",
            "maximum_plus_one",
            "valid",
        ],
    ),
    (
        "signature.verify",
        &[
            "invalid_constraint",
            "invalid_encoding",
            "signature_invalid",
            "tamper_meaningful_byte",
            "valid",
        ],
    ),
];

/// What a case expects.
#[derive(Debug, Clone, PartialEq)]
pub enum Expected {
    /// A success whose listed projections must match.
    Valid(Object),
    /// A deny with this code string.
    Invalid(String),
}

/// One corpus case.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// Unique id.
    pub id: String,
    /// Surface.
    pub surface: String,
    /// Class.
    pub class: String,
    /// Input members.
    pub input: Object,
    /// Expected outcome.
    pub expected: Expected,
}

/// A loaded, integrity-checked corpus.
#[derive(Debug, Clone)]
pub struct Corpus {
    /// Cases in file-path order, then file order.
    pub cases: Vec<Case>,
    /// The recomputed corpus identity.
    pub corpus_digest: Digest,
    /// All files by path (schemas and raw sidecars are read from here).
    pub files: BTreeMap<String, Vec<u8>>,
}

fn fail(code: Code, subject: impl Into<String>) -> Error {
    Error::new(code, subject)
}

fn index_invalid(what: &str) -> Error {
    fail(Code::CorpusIndexInvalid, format!("index.{what}"))
}

struct FileEntry {
    path: String,
    cases: i64,
    hash: String,
}

impl Corpus {
    /// Load and check a corpus from its files (spec 15: pure over `{path → bytes}`).
    pub fn load(files: &BTreeMap<String, Vec<u8>>) -> Result<Corpus> {
        // 1. index present and decodable.
        let index_bytes = files.get(INDEX).ok_or_else(|| index_invalid("absent"))?;
        let index = json::decode(index_bytes, &DecodeBounds::MAX)
            .map_err(|_| index_invalid("undecodable"))?;
        // 2. structure.
        let o = index.as_object().ok_or_else(|| index_invalid("type"))?;
        let entries = index_structure(o)?;
        // 3. canonical index bytes.
        if jcs::encode(&index) != *index_bytes {
            return Err(index_invalid("non_canonical"));
        }
        // 4. corpus digest.
        let declared = o
            .get("corpus_digest")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let corpus_digest = Digest::compute(
            Domain::CorpusIndex,
            &jcs::encode(&Value::Object(o.without(&["corpus_digest"]))),
        );
        if declared != corpus_digest.to_tagged() {
            return Err(index_invalid("corpus_digest"));
        }
        // 5. registry digest.
        if o.get("registry_digest").and_then(Value::as_str)
            != Some(extension::registry_digest().to_tagged().as_str())
        {
            return Err(index_invalid("registry_digest"));
        }
        // 6. not empty.
        let total = o
            .get("total_cases")
            .and_then(Value::as_int)
            .unwrap_or_default();
        if total == 0 {
            return Err(fail(Code::CorpusEmpty, "index.total_cases"));
        }
        // 7. load files by sorted path.
        let mut per_file: Vec<(&FileEntry, Vec<Value>)> = Vec::new();
        for e in &entries {
            let bytes = files
                .get(&e.path)
                .ok_or_else(|| fail(Code::CorpusFileSetMismatch, e.path.clone()))?;
            let mut cases = Vec::new();
            if e.path.starts_with("cases/") {
                let v = json::decode(bytes, &DecodeBounds::MAX)
                    .map_err(|_| fail(Code::CorpusCaseInvalid, e.path.clone()))?;
                let ok_format = v.get("format").and_then(Value::as_str) == Some(CASES_FORMAT);
                let list = v.get("cases").and_then(Value::as_array);
                let (true, Some(list)) = (ok_format, list) else {
                    return Err(fail(Code::CorpusCaseInvalid, e.path.clone()));
                };
                cases = list.to_vec();
            }
            per_file.push((e, cases));
        }
        // 8. file set, both directions.
        let listed: BTreeSet<&str> = entries.iter().map(|e| e.path.as_str()).collect();
        if let Some(extra) = files
            .keys()
            .find(|p| p.as_str() != INDEX && !listed.contains(p.as_str()))
        {
            return Err(fail(Code::CorpusFileSetMismatch, extra.clone()));
        }
        // 9. per-file hashes (plain SHA-256, notes 2).
        for e in &entries {
            let bytes = files.get(&e.path).map(Vec::as_slice).unwrap_or_default();
            if base64url::encode(Digest::plain(bytes).as_bytes()) != e.hash {
                return Err(fail(Code::CorpusHashMismatch, e.path.clone()));
            }
        }
        // 10. counts.
        let mut observed_total = 0i64;
        for (e, cases) in &per_file {
            if cases.len() as i64 != e.cases {
                return Err(fail(Code::CorpusCountMismatch, e.path.clone()));
            }
            observed_total += e.cases;
        }
        if observed_total != total {
            return Err(fail(Code::CorpusCountMismatch, "index.total_cases"));
        }
        // 11. unique ids.
        let mut ids = BTreeSet::new();
        for (_, cases) in &per_file {
            for c in cases {
                let id = c
                    .get("id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| fail(Code::CorpusCaseInvalid, "case.id"))?;
                if !ids.insert(id.to_owned()) {
                    return Err(fail(Code::CorpusCaseIdDuplicate, id.to_owned()));
                }
            }
        }
        // 12. case validity and tamper re-derivation.
        let mut parsed = Vec::new();
        let mut raw_by_id: HashMap<String, &Value> = HashMap::new();
        for (e, cases) in &per_file {
            for c in cases {
                let case = parse_case(c, &e.path)?;
                raw_by_id.insert(case.id.clone(), c);
                parsed.push(case);
            }
        }
        for (_, cases) in &per_file {
            for c in cases {
                if let Some(t) = c.get("tamper") {
                    check_tamper(c, t, &raw_by_id)?;
                }
            }
        }
        // 13. applicability against the compiled floor.
        check_applicability(o.get("applicability"), &parsed)?;
        // 14. raw bindings.
        for c in &parsed {
            if let Some(raw) = c.input.get("raw_file") {
                let ok = raw
                    .as_str()
                    .is_some_and(|p| p.starts_with("raw/") && files.contains_key(p));
                if !ok {
                    return Err(fail(Code::CorpusCaseInvalid, c.id.clone()));
                }
            }
        }
        Ok(Corpus {
            cases: parsed,
            corpus_digest,
            files: files.clone(),
        })
    }
}

fn index_structure(o: &Object) -> Result<Vec<FileEntry>> {
    if o.get("format").and_then(Value::as_str) != Some(INDEX_FORMAT) {
        return Err(index_invalid("format"));
    }
    if o.get("protocol_revision")
        .and_then(Value::as_int)
        .is_none_or(|r| r < 1)
    {
        return Err(index_invalid("protocol_revision"));
    }
    if o.get("total_cases")
        .and_then(Value::as_int)
        .is_none_or(|t| t < 0)
    {
        return Err(index_invalid("total_cases"));
    }
    if o.get("public_key_fingerprints")
        .and_then(Value::as_array)
        .is_none()
    {
        return Err(index_invalid("public_key_fingerprints"));
    }
    for k in ["corpus_digest", "registry_digest"] {
        if o.get(k).and_then(Value::as_str).is_none() {
            return Err(index_invalid(k));
        }
    }
    if o.get("applicability").and_then(Value::as_object).is_none() {
        return Err(index_invalid("applicability"));
    }
    let files = o
        .get("files")
        .and_then(Value::as_array)
        .ok_or_else(|| index_invalid("files"))?;
    let mut out: Vec<FileEntry> = Vec::new();
    for f in files {
        let fo = f.as_object().ok_or_else(|| index_invalid("files"))?;
        let path = fo
            .get("path")
            .and_then(Value::as_str)
            .ok_or_else(|| index_invalid("files.path"))?;
        let cases = fo
            .get("cases")
            .and_then(Value::as_int)
            .filter(|c| *c >= 0)
            .ok_or_else(|| index_invalid("files.cases"))?;
        let hash = fo
            .get("sha256_base64url")
            .and_then(Value::as_str)
            .ok_or_else(|| index_invalid("files.sha256_base64url"))?;
        let allowed = (["cases/", "schemas/", "vectors/"]
            .iter()
            .any(|p| path.starts_with(p))
            && path.ends_with(".json"))
            || (path.starts_with("raw/") && path.ends_with(".raw"));
        if !allowed || path.contains("..") || fo.len() != 3 {
            return Err(index_invalid("files.path"));
        }
        if out.last().is_some_and(|last| last.path.as_str() >= path) {
            return Err(index_invalid("files.order"));
        }
        out.push(FileEntry {
            path: path.to_owned(),
            cases,
            hash: hash.to_owned(),
        });
    }
    Ok(out)
}

fn parse_case(c: &Value, path: &str) -> Result<Case> {
    let invalid = |what: &str| fail(Code::CorpusCaseInvalid, format!("{path}:{what}"));
    let o = c.as_object().ok_or_else(|| invalid("case"))?;
    let s = |k: &str| {
        o.get(k)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| invalid(k))
    };
    let (id, surface, class) = (s("id")?, s("surface")?, s("class")?);
    if !SURFACES.contains(&surface.as_str()) || !CLASSES.contains(&class.as_str()) {
        return Err(invalid(&id));
    }
    if format!("cases/{}.json", surface.replace('.', "-")) != path {
        return Err(invalid(&id));
    }
    let input = o
        .get("input")
        .and_then(Value::as_object)
        .cloned()
        .ok_or_else(|| invalid(&id))?;
    let exp = o
        .get("expected")
        .and_then(Value::as_object)
        .ok_or_else(|| invalid(&id))?;
    let expected = match exp.get("verdict").and_then(Value::as_str) {
        Some("invalid") => {
            let code = exp
                .get("code")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid(&id))?;
            if exp.len() != 2 {
                return Err(invalid(&id));
            }
            Expected::Invalid(code.to_owned())
        }
        Some("valid") => {
            let projections = exp.without(&["verdict"]);
            // notes 4: a verdict-only valid case is a vacuous green and is refused.
            if projections.is_empty() {
                return Err(invalid(&id));
            }
            Expected::Valid(projections)
        }
        _ => return Err(invalid(&id)),
    };
    if let Some(k) = o
        .keys()
        .find(|k| !["id", "surface", "class", "input", "expected", "tamper"].contains(&k.as_str()))
    {
        return Err(invalid(k));
    }
    Ok(Case {
        id,
        surface,
        class,
        input,
        expected,
    })
}

/// The bytes a tamper targets: `input.text`, `input.entry`, or the decoded `input.base64url`.
fn tamper_bytes(case: &Value, target: Option<&str>) -> Option<Vec<u8>> {
    let input = case.get("input")?;
    let target = target.unwrap_or(if input.get("text").is_some() {
        "input.text"
    } else {
        "input.base64url"
    });
    match target {
        "input.text" => input.get("text")?.as_str().map(|s| s.as_bytes().to_vec()),
        "input.entry" => input.get("entry")?.as_str().map(|s| s.as_bytes().to_vec()),
        "input.base64url" => base64url::decode(input.get("base64url")?.as_str()?).ok(),
        _ => None,
    }
}

fn check_tamper(case: &Value, t: &Value, by_id: &HashMap<String, &Value>) -> Result<()> {
    let id = case.get("id").and_then(Value::as_str).unwrap_or_default();
    let invalid = || fail(Code::CorpusCaseInvalid, format!("{id}:tamper"));
    let to = t.as_object().ok_or_else(invalid)?;
    let base_id = to
        .get("base_case")
        .and_then(Value::as_str)
        .ok_or_else(invalid)?;
    let index = to
        .get("byte_index")
        .and_then(Value::as_int)
        .ok_or_else(invalid)?;
    let xor = to
        .get("xor")
        .and_then(Value::as_int)
        .filter(|x| (1..=255).contains(x))
        .ok_or_else(invalid)?;
    let target = match to.get("target") {
        None => None,
        Some(v) => Some(v.as_str().ok_or_else(invalid)?),
    };
    let base = by_id.get(base_id).ok_or_else(invalid)?;
    let mut expected = tamper_bytes(base, target).ok_or_else(invalid)?;
    let actual = tamper_bytes(case, target).ok_or_else(invalid)?;
    let i = usize::try_from(index)
        .ok()
        .filter(|i| *i < expected.len())
        .ok_or_else(invalid)?;
    expected[i] ^= xor as u8;
    if expected != actual {
        return Err(invalid());
    }
    Ok(())
}

fn check_applicability(app: Option<&Value>, cases: &[Case]) -> Result<()> {
    let incomplete = |what: String| fail(Code::CorpusApplicabilityIncomplete, what);
    let app = app
        .and_then(Value::as_object)
        .ok_or_else(|| incomplete("applicability".into()))?;
    let mut observed: HashMap<(&str, &str), i64> = HashMap::new();
    for c in cases {
        *observed
            .entry((c.surface.as_str(), c.class.as_str()))
            .or_default() += 1;
    }
    if app.len() != SURFACES.len() {
        return Err(incomplete("applicability".into()));
    }
    for (surface, required) in FLOOR {
        let row = app
            .get(surface)
            .and_then(Value::as_object)
            .ok_or_else(|| incomplete(surface.to_owned()))?;
        if row.len() != CLASSES.len() {
            return Err(incomplete(surface.to_owned()));
        }
        for class in CLASSES {
            let cell = row
                .get(class)
                .ok_or_else(|| incomplete(format!("{surface}.{class}")))?;
            let seen = observed.get(&(surface, class)).copied().unwrap_or(0);
            match cell {
                Value::Number(_) => {
                    let n = cell
                        .as_int()
                        .ok_or_else(|| incomplete(format!("{surface}.{class}")))?;
                    if n != seen || (required.contains(&class) && n < 1) {
                        return Err(incomplete(format!("{surface}.{class}")));
                    }
                }
                Value::Object(na) => {
                    let reason = na.get("n_a").and_then(Value::as_str).unwrap_or_default();
                    if na.len() != 1 || reason.is_empty() || seen != 0 || required.contains(&class)
                    {
                        return Err(incomplete(format!("{surface}.{class}")));
                    }
                }
                _ => return Err(incomplete(format!("{surface}.{class}"))),
            }
        }
    }
    Ok(())
}
