//! Evidence retention (spec 16.2, 18.2, 18.3): receipts and audit events past their retention are
//! archived by the runtime, then removed here, leaving a tombstone per receipt chain.

use super::{AuditRecord, NewAudit, ReceiptRecord};

/// What evidence may be removed, and how much per batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvidenceCutoffs {
    /// Audit events that occurred before this time, epoch ms; `None` keeps them.
    pub audit_before_ms: Option<i64>,
    /// Receipt chains of actions that ended, and whose last receipt was written, before this
    /// time, epoch ms; `None` keeps them.
    pub receipts_before_ms: Option<i64>,
    /// At most this many audit events per batch (1..=10000).
    pub max_audit: u32,
    /// At most this many receipt chains per batch (1..=1000).
    pub max_chains: u32,
}

/// One receipt chain due for removal, whole.
#[derive(Debug, Clone, PartialEq)]
pub struct DueChain {
    /// Tenant.
    pub tenant: String,
    /// Chain id (the action's id).
    pub chain_id: String,
    /// Its receipts in chain order.
    pub receipts: Vec<ReceiptRecord>,
}

/// Evidence due for removal: a prefix of the audit log and whole receipt chains.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DueEvidence {
    /// Audit events in listing order.
    pub audit: Vec<AuditRecord>,
    /// The listing position of the last of them (what the purge removes through).
    pub audit_through: Option<i64>,
    /// Receipt chains.
    pub chains: Vec<DueChain>,
}

impl DueEvidence {
    /// Nothing is due.
    pub fn is_empty(&self) -> bool {
        self.audit.is_empty() && self.chains.is_empty()
    }
}

/// A receipt chain to remove, as archived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainPurge {
    /// Tenant.
    pub tenant: String,
    /// Chain id.
    pub chain_id: String,
    /// The principal of its receipts (who may still learn that it was purged).
    pub principal: Option<String>,
    /// Number of receipts archived.
    pub receipts: u64,
    /// The hash of the last receipt archived: the chain is removed only if this is still its head.
    pub last_hash: String,
    /// The chain's root hash (spec 18.2), kept so settlement and auditors can still name it.
    pub root_hash: String,
}

/// The removal of an archived batch, committed in one transaction.
#[derive(Debug, Clone)]
pub struct EvidencePurge {
    /// Remove audit events through this listing position.
    pub audit_through: Option<i64>,
    /// Remove these chains (each only if unchanged since it was archived).
    pub chains: Vec<ChainPurge>,
    /// The archive file's name; `None` when purging without archive was configured.
    pub archive: Option<String>,
    /// SHA-256 (hex) of the archive file.
    pub archive_sha256: Option<String>,
    /// Time, epoch ms.
    pub purged_at_ms: i64,
    /// Audit events recording the purge (one per tenant), appended in the same transaction.
    pub audit: Vec<NewAudit>,
}

/// What an evidence purge removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EvidencePurged {
    /// Audit events removed.
    pub audit: u64,
    /// Receipt chains removed.
    pub chains: u64,
    /// Receipts removed.
    pub receipts: u64,
    /// Chains skipped because they changed after they were archived.
    pub chains_changed: u64,
}

/// What is left of a purged receipt chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainTombstone {
    /// Tenant.
    pub tenant: String,
    /// Chain id.
    pub chain_id: String,
    /// The principal of its receipts.
    pub principal: Option<String>,
    /// Number of receipts purged.
    pub receipts: u64,
    /// The chain's root hash.
    pub root_hash: String,
    /// The archive that holds it, if one was written.
    pub archive: Option<String>,
    /// SHA-256 (hex) of that archive.
    pub archive_sha256: Option<String>,
    /// When it was purged, epoch ms.
    pub purged_at_ms: i64,
}
