//! Receipt hashing and chain verification (spec 18.2).
//!
//! Hash form: this crate follows the spec's reading, "copy the receipt and **omit** its current
//! `hash`". Another implementation hashes the receipt with `"hash": null` instead. The verifier
//! recognises that form explicitly: under the default [`HashForm::Omit`] such a receipt is rejected
//! with [`ReceiptErrorKind::NullFormHash`] (not a generic mismatch); a caller that must interoperate
//! can opt in with [`HashForm::AcceptNull`], which accepts either form per receipt.
//!
//! Verification works on the JSON as received, removing only the top-level `hash` member, so a
//! sender's explicit `null` members stay in the hashed bytes ("without omitting any other field").

use serde_json::Value;

use crate::canonical::canonical_hash_with;
use crate::validate::{Checker, Validate};
use crate::{ProtocolError, Receipt, ReceiptChain};

/// Which receipt-hash form a verifier accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HashForm {
    /// Spec 18.2: `hash` omitted before hashing. The only form this crate produces.
    #[default]
    Omit,
    /// Also accept hashes computed with `"hash": null` (the other implementation's form).
    AcceptNull,
}

/// The hash of a receipt (spec 18.2): lowercase hex SHA-256 of the canonical receipt without `hash`.
pub fn receipt_hash(receipt: &Receipt) -> String {
    let v = serde_json::to_value(receipt).unwrap_or(Value::Null);
    receipt_value_hash(&v)
}

/// The spec's hash of a receipt given as JSON: `hash` removed, everything else kept as received.
pub fn receipt_value_hash(receipt: &Value) -> String {
    canonical_hash_with(receipt, Some("hash"), None)
}

/// The other implementation's form: `hash` set to `null` before hashing.
pub fn receipt_value_hash_null_form(receipt: &Value) -> String {
    canonical_hash_with(receipt, Some("hash"), Some(&Value::Null))
}

/// A chain's `root_hash`: lowercase hex SHA-256 of the concatenated receipt hash strings, in order.
pub fn root_hash<'a>(hashes: impl IntoIterator<Item = &'a str>) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for s in hashes {
        h.update(s.as_bytes());
    }
    hex::encode(h.finalize())
}

/// Sets `previous_hash` and `hash` on `receipt` so it extends a chain whose last hash is `previous`.
pub fn seal(receipt: &mut Receipt, previous: Option<&str>) {
    receipt.previous_hash = previous.map(str::to_owned);
    receipt.hash = None;
    receipt.hash = Some(receipt_hash(receipt));
}

/// Builds a chain receipt by receipt, keeping the links and root consistent.
#[derive(Debug, Clone)]
pub struct ChainBuilder {
    chain: ReceiptChain,
}

impl ChainBuilder {
    /// An empty chain with this id.
    pub fn new(chain_id: impl Into<String>) -> Self {
        Self {
            chain: ReceiptChain {
                chain_id: chain_id.into(),
                receipts: Vec::new(),
                root_hash: None,
            },
        }
    }

    /// Continues an existing chain (its receipts must already be sealed).
    pub fn resume(chain: ReceiptChain) -> Self {
        Self { chain }
    }

    /// Seals `receipt` onto the end of the chain and returns its hash.
    pub fn push(&mut self, mut receipt: Receipt) -> String {
        let previous = self.chain.receipts.last().and_then(|r| r.hash.clone());
        seal(&mut receipt, previous.as_deref());
        let hash = receipt.hash.clone().unwrap_or_default();
        self.chain.receipts.push(receipt);
        self.chain.root_hash = Some(root_hash(
            self.chain.receipts.iter().filter_map(|r| r.hash.as_deref()),
        ));
        hash
    }

    /// The chain so far.
    pub fn chain(&self) -> &ReceiptChain {
        &self.chain
    }

    /// The finished chain.
    pub fn finish(self) -> ReceiptChain {
        self.chain
    }
}

/// A verified chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedChain {
    /// The recomputed (and matching) root hash.
    pub root_hash: String,
    /// Number of receipts.
    pub receipts: usize,
}

/// What is wrong with a chain.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReceiptErrorKind {
    /// The chain or a receipt is not the expected JSON shape.
    Malformed(String),
    /// A receipt has no `hash`.
    MissingHash,
    /// A receipt's `hash` does not match its content.
    HashMismatch {
        /// Recomputed hash.
        expected: String,
        /// Hash found.
        found: String,
    },
    /// The hash matches only the `"hash": null` form, which [`HashForm::Omit`] rejects.
    NullFormHash,
    /// The first receipt carries a `previous_hash`.
    FirstHasPrevious,
    /// `previous_hash` does not equal the prior receipt's hash.
    BrokenLink {
        /// The prior receipt's hash.
        expected: String,
        /// The `previous_hash` found (empty when absent).
        found: String,
    },
    /// A non-empty chain has no `root_hash`.
    MissingRootHash,
    /// `root_hash` does not match the receipts.
    RootMismatch {
        /// Recomputed root.
        expected: String,
        /// Root found.
        found: String,
    },
}

/// The first broken link of a chain.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("receipt chain broken{}: {}", index.map(|i| format!(" at receipt {i}")).unwrap_or_default(), describe(kind))]
pub struct ReceiptError {
    /// Index of the first bad receipt (`None` for chain-level problems).
    pub index: Option<usize>,
    /// What is wrong.
    pub kind: ReceiptErrorKind,
}

fn describe(kind: &ReceiptErrorKind) -> String {
    match kind {
        ReceiptErrorKind::Malformed(m) => format!("malformed: {m}"),
        ReceiptErrorKind::MissingHash => "hash is missing".into(),
        ReceiptErrorKind::HashMismatch { expected, found } => format!("hash {found} != recomputed {expected}"),
        ReceiptErrorKind::NullFormHash => {
            "hash was computed with `\"hash\": null`; spec 18.2 omits the member (use HashForm::AcceptNull to accept)".into()
        }
        ReceiptErrorKind::FirstHasPrevious => "the first receipt has a previous_hash".into(),
        ReceiptErrorKind::BrokenLink { expected, found } => format!("previous_hash {found:?} != prior hash {expected}"),
        ReceiptErrorKind::MissingRootHash => "a non-empty chain has no root_hash".into(),
        ReceiptErrorKind::RootMismatch { expected, found } => format!("root_hash {found} != recomputed {expected}"),
    }
}

impl ReceiptError {
    /// Stable wire code.
    pub fn code(&self) -> crate::ErrorCode {
        use crate::ErrorCode as C;
        match self.kind {
            ReceiptErrorKind::Malformed(_) => C::ReceiptMalformed,
            ReceiptErrorKind::MissingHash => C::ReceiptMissingHash,
            ReceiptErrorKind::HashMismatch { .. } => C::ReceiptHashMismatch,
            ReceiptErrorKind::NullFormHash => C::ReceiptNullFormHash,
            ReceiptErrorKind::FirstHasPrevious => C::ReceiptFirstHasPrevious,
            ReceiptErrorKind::BrokenLink { .. } => C::ReceiptBrokenLink,
            ReceiptErrorKind::MissingRootHash => C::ReceiptMissingRootHash,
            ReceiptErrorKind::RootMismatch { .. } => C::ReceiptRootMismatch,
        }
    }

    /// JSON pointer of the offending member relative to the chain: the first bad receipt, or
    /// `/root_hash` for a missing or wrong root.
    pub fn pointer(&self) -> String {
        match (self.index, &self.kind) {
            (Some(i), _) => format!("/receipts/{i}"),
            (None, ReceiptErrorKind::MissingRootHash | ReceiptErrorKind::RootMismatch { .. }) => {
                "/root_hash".into()
            }
            (None, _) => String::new(),
        }
    }

    /// The wire error (`permanent`; the pointer names the receipt or the root).
    pub fn to_protocol_error(&self) -> ProtocolError {
        self.code()
            .error(self.to_string())
            .with_pointer(&self.pointer())
    }
}

/// A broken receipt chain inside a larger document: where the chain is, and its first broken link.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error} (chain at `{chain}`)")]
pub struct EmbeddedChainError {
    /// JSON pointer of the chain in the document.
    pub chain: String,
    /// The chain's first broken link.
    pub error: ReceiptError,
}

impl EmbeddedChainError {
    /// Stable wire code (the chain error's).
    pub fn code(&self) -> crate::ErrorCode {
        self.error.code()
    }

    /// JSON pointer of the offending member in the document, e.g.
    /// `/body/action_status/receipt_chain/receipts/2`.
    pub fn pointer(&self) -> String {
        format!("{}{}", self.chain, self.error.pointer())
    }
}

/// JSON pointers of every receipt chain inside a decoded value, in document order.
///
/// Found by the value's semantic walk, so only members typed [`ReceiptChain`] count: free-form
/// JSON (an action's `input`, a receipt's `data`) holding a `receipt_chain` key is never taken for one.
pub fn embedded_chains<T: Validate + ?Sized>(value: &T) -> Vec<String> {
    let mut c = Checker::locating_chains();
    value.validate(&mut c);
    c.into_chains()
}

/// Verifies each chain at `chains` (pointers from [`embedded_chains`]) in `received`, the document
/// as received so explicit `null` members stay in the hashed bytes; stops at the first broken one.
pub fn verify_embedded(
    received: &Value,
    chains: &[String],
    form: HashForm,
) -> Result<Vec<VerifiedChain>, EmbeddedChainError> {
    chains
        .iter()
        .map(|chain| {
            let broken = |error| EmbeddedChainError {
                chain: chain.clone(),
                error,
            };
            // Fail closed if the pointer came from another document than `received`.
            let value = received.pointer(chain).ok_or_else(|| {
                broken(err(
                    None,
                    ReceiptErrorKind::Malformed("no receipt chain at this pointer".into()),
                ))
            })?;
            verify_chain_value(value, form).map_err(broken)
        })
        .collect()
}

fn err(index: Option<usize>, kind: ReceiptErrorKind) -> ReceiptError {
    ReceiptError { index, kind }
}

/// Verifies every receipt, every link and the root of a typed chain (18.2).
pub fn verify_chain(chain: &ReceiptChain) -> Result<VerifiedChain, ReceiptError> {
    let value = serde_json::to_value(chain)
        .map_err(|e| err(None, ReceiptErrorKind::Malformed(e.to_string())))?;
    verify_chain_value(&value, HashForm::Omit)
}

/// Verifies a chain given as received JSON (`{"chain_id", "receipts": [...], "root_hash"}`), naming
/// the first broken link.
pub fn verify_chain_value(chain: &Value, form: HashForm) -> Result<VerifiedChain, ReceiptError> {
    let receipts = chain
        .get("receipts")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            err(
                None,
                ReceiptErrorKind::Malformed("`receipts` must be an array".into()),
            )
        })?;
    let mut hashes: Vec<&str> = Vec::with_capacity(receipts.len());
    for (i, r) in receipts.iter().enumerate() {
        if !r.is_object() {
            return Err(err(
                Some(i),
                ReceiptErrorKind::Malformed("a receipt must be an object".into()),
            ));
        }
        let found = match r.get("hash") {
            Some(Value::String(h)) => h.as_str(),
            _ => return Err(err(Some(i), ReceiptErrorKind::MissingHash)),
        };
        let expected = receipt_value_hash(r);
        if expected != found {
            let null_form = receipt_value_hash_null_form(r) == found;
            match (null_form, form) {
                (true, HashForm::AcceptNull) => {}
                (true, HashForm::Omit) => return Err(err(Some(i), ReceiptErrorKind::NullFormHash)),
                (false, _) => {
                    return Err(err(
                        Some(i),
                        ReceiptErrorKind::HashMismatch {
                            expected,
                            found: found.to_owned(),
                        },
                    ));
                }
            }
        }
        let previous = r.get("previous_hash").and_then(Value::as_str);
        match (hashes.last(), previous) {
            (None, None) => {}
            (None, Some(_)) => return Err(err(Some(i), ReceiptErrorKind::FirstHasPrevious)),
            (Some(prior), p) if p == Some(*prior) => {}
            (Some(prior), p) => {
                return Err(err(
                    Some(i),
                    ReceiptErrorKind::BrokenLink {
                        expected: (*prior).to_owned(),
                        found: p.unwrap_or_default().to_owned(),
                    },
                ));
            }
        }
        hashes.push(found);
    }
    let root = root_hash(hashes.iter().copied());
    match chain.get("root_hash").and_then(Value::as_str) {
        None if !receipts.is_empty() => Err(err(None, ReceiptErrorKind::MissingRootHash)),
        Some(found) if found != root => Err(err(
            None,
            ReceiptErrorKind::RootMismatch {
                expected: root,
                found: found.to_owned(),
            },
        )),
        _ => Ok(VerifiedChain {
            root_hash: root,
            receipts: receipts.len(),
        }),
    }
}

/// Why a received document did not verify as a receipt chain.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    /// The bytes are not JSON (serde_json's error).
    #[error("not JSON: {0}")]
    Json(serde_json::Error),
    /// The chain is broken; the first broken link.
    #[error(transparent)]
    Chain(ReceiptError),
}

/// Verifies the receipt chain in received bytes (a `ReceiptChain` object, or an envelope carrying
/// one at `/body/receipt_chain`): parse the whole document, take `/body/receipt_chain` when present,
/// and run [`verify_chain_value`].
///
/// The reference verifier. The `aip-receipt-verify` crate gives the same verdicts at close to the
/// speed of SHA-256 over the bytes; it lives apart so the wire model stays light.
pub fn verify_document_reference(
    bytes: &[u8],
    form: HashForm,
) -> Result<VerifiedChain, DocumentError> {
    let value: Value = serde_json::from_slice(bytes).map_err(DocumentError::Json)?;
    let chain = value.pointer("/body/receipt_chain").unwrap_or(&value);
    verify_chain_value(chain, form).map_err(DocumentError::Chain)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Principal, PrincipalId, PrincipalKind, ReceiptId, ReceiptType, Timestamp};
    use serde_json::json;

    fn receipt(n: u32) -> Receipt {
        Receipt {
            id: ReceiptId::new(format!("rcpt_{n}")),
            receipt_type: ReceiptType::ActionAccepted,
            actor: Principal {
                id: PrincipalId::new("service:gw"),
                kind: PrincipalKind::Service,
                display_name: None,
                trust_domain: None,
                did: None,
                external_refs: vec![],
                delegated_authority: vec![],
                auth_context: None,
            },
            occurred_at: Timestamp::from_wire("2026-07-14T08:30:00Z"),
            correlation_id: None,
            data: Some(json!({"n": n, "signature": "kept"})),
            previous_hash: None,
            hash: None,
        }
    }

    fn chain(n: u32) -> ReceiptChain {
        let mut b = ChainBuilder::new("chain_1");
        for i in 0..n {
            b.push(receipt(i));
        }
        b.finish()
    }

    /// Three receipts whose last one is sealed over a wrong `previous_hash`.
    fn chain_with_broken_link() -> ReceiptChain {
        let mut c = chain(3);
        seal(&mut c.receipts[2], Some("00"));
        c
    }

    #[test]
    fn a_built_chain_verifies_and_reports_its_root() {
        let c = chain(3);
        let v = verify_chain(&c).unwrap();
        assert_eq!(v.receipts, 3);
        assert_eq!(Some(v.root_hash), c.root_hash);
    }

    use crate::canonical::{sha256_hex, to_canonical_vec};

    #[test]
    fn a_built_chain_serializes_in_canonical_form() {
        use crate::{DelegatedAuthorityGrant, ExternalRef};
        let mut b = ChainBuilder::new("chain_1");
        for i in 0..3 {
            let mut r = receipt(i);
            // Every optional member of the actor set, so each nested type's order counts.
            r.actor.display_name = Some("Gateway".into());
            r.actor.trust_domain = Some("example.com".into());
            r.actor.did = Some("did:key:z6Mk".into());
            r.actor.external_refs = vec![ExternalRef {
                id: "u1".into(),
                system: "crm".into(),
                r#type: "user".into(),
            }];
            r.actor.delegated_authority = vec![DelegatedAuthorityGrant {
                expires_at: Some(Timestamp::from_wire("2026-07-15T08:30:00Z")),
                principal_id: PrincipalId::new("user:1"),
                reason: Some("on call".into()),
                scopes: vec!["actions:read".into()],
            }];
            r.actor.auth_context = Some(json!({"z": 1, "a": [2]}));
            r.correlation_id = Some(crate::CorrelationId::new("corr_1"));
            b.push(r);
        }
        let chain = b.finish();
        let bytes = serde_json::to_vec(&chain).unwrap();
        let value: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            bytes,
            to_canonical_vec(&value),
            "serde writes receipts canonically"
        );
        assert_eq!(
            verify_document_reference(&bytes, HashForm::Omit)
                .ok()
                .map(|v| v.root_hash),
            chain.root_hash
        );
    }

    #[test]
    fn the_hash_omits_the_hash_member_as_spec_18_2_says() {
        let mut r = receipt(0);
        seal(&mut r, None);
        let mut v = serde_json::to_value(&r).unwrap();
        v.as_object_mut().unwrap().remove("hash");
        assert_eq!(
            r.hash.as_deref(),
            Some(sha256_hex(&to_canonical_vec(&v)).as_str())
        );
    }

    #[test]
    fn tampered_content_names_the_first_bad_receipt() {
        let mut v = serde_json::to_value(chain(3)).unwrap();
        v["receipts"][1]["data"]["n"] = json!(99);
        let e = verify_chain_value(&v, HashForm::Omit).unwrap_err();
        assert_eq!(e.index, Some(1));
        assert_eq!(e.code(), "aip.receipt.hash_mismatch");
    }

    #[test]
    fn a_broken_link_and_a_wrong_root_are_reported() {
        let c = chain_with_broken_link();
        let e = verify_chain(&c).unwrap_err();
        assert_eq!(
            (e.index, e.code().as_str()),
            (Some(2), "aip.receipt.broken_link")
        );

        let mut c = chain(2);
        c.root_hash = Some("ab".into());
        assert_eq!(
            verify_chain(&c).unwrap_err().code(),
            "aip.receipt.root_mismatch"
        );
        c.root_hash = None;
        assert_eq!(
            verify_chain(&c).unwrap_err().code(),
            "aip.receipt.missing_root_hash"
        );
    }

    #[test]
    fn null_form_hashes_are_rejected_by_default_and_accepted_only_on_request() {
        // Build a chain the other implementation's way: hash over the receipt with "hash": null.
        let mut receipts = Vec::new();
        let mut prev: Option<String> = None;
        for i in 0..2 {
            let mut v = serde_json::to_value(receipt(i)).unwrap();
            if let Some(p) = &prev {
                v["previous_hash"] = json!(p);
            }
            let h = receipt_value_hash_null_form(&v);
            v["hash"] = json!(h);
            prev = Some(h);
            receipts.push(v);
        }
        let hashes: Vec<String> = receipts
            .iter()
            .map(|r| r["hash"].as_str().unwrap().to_owned())
            .collect();
        let root = root_hash(hashes.iter().map(String::as_str));
        let chain = json!({"chain_id": "c", "receipts": receipts, "root_hash": root});
        let e = verify_chain_value(&chain, HashForm::Omit).unwrap_err();
        assert_eq!(
            (e.index, e.kind.clone()),
            (Some(0), ReceiptErrorKind::NullFormHash)
        );
        assert_eq!(
            verify_chain_value(&chain, HashForm::AcceptNull)
                .unwrap()
                .root_hash,
            root
        );
    }

    #[test]
    fn explicit_null_members_stay_in_the_hashed_bytes() {
        let mut v = serde_json::to_value(receipt(0)).unwrap();
        v["correlation_id"] = Value::Null;
        let with_null = receipt_value_hash(&v);
        v.as_object_mut().unwrap().remove("correlation_id");
        assert_ne!(with_null, receipt_value_hash(&v));
    }

    fn status(id: &str, chain: Option<&ReceiptChain>) -> Value {
        let mut s = json!({"action_id": id, "capability_id": "cap:x", "state": "completed",
                           "updated_at": "2026-07-14T08:30:00Z"});
        if let Some(c) = chain {
            s["receipt_chain"] = serde_json::to_value(c).unwrap();
        }
        s
    }

    fn envelope(mt: &str, key: &str, body: Value) -> Value {
        json!({"aip_version": "1.0", "message_type": mt, "message_id": "msg_1",
               "sent_at": "2026-07-14T08:30:00Z", "body": {key: body}})
    }

    fn decode(v: &Value) -> crate::Envelope {
        crate::envelope_from_value(v).unwrap()
    }

    #[test]
    fn embedded_chains_are_found_by_type_not_by_member_name() {
        let c = chain(2);
        let list = envelope(
            "aip.lifecycle.v1.action_list",
            "action_list",
            json!({"actions": [status("act_1", None), status("act_2", Some(&c))], "total_size": 2}),
        );
        assert_eq!(
            embedded_chains(&decode(&list)),
            ["/body/action_list/actions/1/receipt_chain"]
        );
        let audit = envelope(
            "aip.audit.v1.audit_query_result",
            "audit_query_result",
            json!({"events": [], "receipt_chains": [c, chain(1)]}),
        );
        assert_eq!(
            embedded_chains(&decode(&audit)),
            [
                "/body/audit_query_result/receipt_chains/0",
                "/body/audit_query_result/receipt_chains/1"
            ]
        );
        // A look-alike inside free-form action input is application data, not a chain.
        let action = envelope(
            "aip.core.v1.action",
            "action",
            json!({"id": "act_1", "capability_id": "cap:x",
                   "input": {"receipt_chain": {"chain_id": "c", "receipts": [{"hash": "00"}]}},
                   "approval": null}),
        );
        assert!(embedded_chains(&decode(&action)).is_empty());
    }

    #[test]
    fn a_broken_embedded_chain_is_named_by_its_pointer_in_the_document() {
        let c = chain_with_broken_link();
        let env = envelope(
            "aip.lifecycle.v1.action_status",
            "action_status",
            status("act_1", Some(&c)),
        );
        let chains = embedded_chains(&decode(&env));
        let e = verify_embedded(&env, &chains, HashForm::Omit).unwrap_err();
        assert_eq!(e.code(), "aip.receipt.broken_link");
        assert_eq!(e.pointer(), "/body/action_status/receipt_chain/receipts/2");

        let mut env = envelope(
            "aip.lifecycle.v1.action_status",
            "action_status",
            status("act_1", Some(&chain(2))),
        );
        let chains = embedded_chains(&decode(&env));
        assert_eq!(
            verify_embedded(&env, &chains, HashForm::Omit)
                .unwrap()
                .len(),
            1
        );
        env["body"]["action_status"]["receipt_chain"]["root_hash"] = json!("ab");
        let e = verify_embedded(&env, &chains, HashForm::Omit).unwrap_err();
        assert_eq!(
            (e.code().as_str(), e.pointer().as_str()),
            (
                "aip.receipt.root_mismatch",
                "/body/action_status/receipt_chain/root_hash"
            )
        );
        let e = verify_embedded(&json!({}), &chains, HashForm::Omit).unwrap_err();
        assert_eq!(e.code(), "aip.receipt.malformed");
    }

    #[test]
    fn an_empty_chain_verifies_with_or_without_a_root() {
        let v = json!({"chain_id": "c", "receipts": []});
        assert_eq!(verify_chain_value(&v, HashForm::Omit).unwrap().receipts, 0);
    }
}
