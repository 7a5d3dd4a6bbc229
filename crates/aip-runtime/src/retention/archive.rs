//! Evidence retention (spec 16.2, 18.2, 18.3): receipts and audit events past their configured
//! retention are written to a signed archive file first, and only then removed from the store, in
//! one transaction that leaves a tombstone per receipt chain (its root hash and the archive's
//! name and SHA-256) and records the purge as an audit event.
//!
//! The archive is durable before anything is removed: it is written to a temporary file, synced,
//! renamed into place and the directory synced. A crash between the archive and the removal leaves
//! an archive whose records are still in the store; the next run archives them again (records
//! carry their ids, so readers deduplicate). `aip retention verify` checks an archive.

use std::path::{Path, PathBuf};

use aip_core::canonical::{sha256_hex, to_canonical_vec};
use aip_store::{
    AuditRecord, ChainPurge, DueChain, DueEvidence, EvidenceCutoffs, EvidencePurge, EvidencePurged,
    NewAudit,
};
use serde_json::{Value, json};

use crate::error::RuntimeError;
use crate::read::views;
use crate::runtime::Runtime;

/// The `type` of an archive document.
pub const ARCHIVE_TYPE: &str = "aip.retention.archive.v1";

/// Audit events per archive.
const MAX_AUDIT_PER_ARCHIVE: u32 = 5_000;
/// Receipt chains per archive.
const MAX_CHAINS_PER_ARCHIVE: u32 = 500;
/// Archives per housekeeping run: the rest waits for the next run.
const MAX_ARCHIVES_PER_RUN: usize = 20;
/// The principal recorded as the actor of a purge.
const HOUSEKEEPER: &str = "svc:aip:housekeeping";

impl Runtime {
    /// Archives and removes the receipts and audit events past retention (nothing when neither
    /// is configured).
    pub(crate) async fn purge_evidence(&self, now: i64) -> Result<EvidencePurged, RuntimeError> {
        let policy = &self.config().retention;
        let mut total = EvidencePurged::default();
        if policy.audit_ms.is_none() && policy.receipts_ms.is_none() {
            return Ok(total);
        }
        let cutoffs = EvidenceCutoffs {
            audit_before_ms: super::before(now, policy.audit_ms),
            receipts_before_ms: super::before(now, policy.receipts_ms),
            max_audit: MAX_AUDIT_PER_ARCHIVE,
            max_chains: MAX_CHAINS_PER_ARCHIVE,
        };
        for _ in 0..MAX_ARCHIVES_PER_RUN {
            let due = self.store().due_evidence(cutoffs).await?;
            if due.is_empty() || !batch_ready(&due, policy, now) {
                break;
            }
            let chains = due
                .chains
                .iter()
                .map(chain_purge)
                .collect::<Result<Vec<_>, _>>()?;
            let (archive, sha) = match &policy.archive_dir {
                Some(dir) => {
                    let (name, sha) = self.write_archive(dir, &due, now).await?;
                    (Some(name), Some(sha))
                }
                // Checked at configuration: purging without an archive is an explicit choice.
                None if policy.purge_unarchived => (None, None),
                None => {
                    return Err(RuntimeError::Internal(
                        "evidence retention needs an archive directory",
                    ));
                }
            };
            let audit = purge_audit(&due, archive.as_deref(), sha.as_deref(), now);
            let purged = self
                .store()
                .purge_evidence(EvidencePurge {
                    audit_through: due.audit_through,
                    chains,
                    archive,
                    archive_sha256: sha,
                    purged_at_ms: now,
                    audit,
                })
                .await?;
            total.audit += purged.audit;
            total.chains += purged.chains;
            total.receipts += purged.receipts;
            total.chains_changed += purged.chains_changed;
            let full = due.audit.len() >= MAX_AUDIT_PER_ARCHIVE as usize
                || due.chains.len() >= MAX_CHAINS_PER_ARCHIVE as usize;
            if !full || (purged.audit == 0 && purged.chains == 0) {
                break;
            }
        }
        Ok(total)
    }

    /// Writes one archive durably; returns its file name and SHA-256.
    async fn write_archive(
        &self,
        dir: &Path,
        due: &DueEvidence,
        now: i64,
    ) -> Result<(String, String), RuntimeError> {
        let name = format!(
            "evidence-{now}-{}.json",
            aip_core::generate_with_prefix("arc_")
        );
        let mut doc = json!({
            "type": ARCHIVE_TYPE,
            "archive": name,
            "node": self.node_key().map(|k| aip_core::signing::did_key(&k.verifying_key())),
            "created_at": views::ts(now)?,
            "audit_through": due.audit_through,
            "audit": due.audit.iter().map(audit_json).collect::<Result<Vec<_>, _>>()?,
            "receipt_chains": due.chains.iter().map(chain_json).collect::<Result<Vec<_>, _>>()?,
        });
        if let Some(key) = self.node_key() {
            aip_core::signing::sign_value(&mut doc, key)
                .map_err(|_| RuntimeError::Internal("the evidence archive could not be signed"))?;
        }
        let bytes = to_canonical_vec(&doc);
        let sha = sha256_hex(&bytes);
        let dir = dir.to_path_buf();
        let file = name.clone();
        tokio::task::spawn_blocking(move || write_durably(&dir, &file, &bytes))
            .await
            .map_err(|_| RuntimeError::Internal("the archive writer stopped"))?
            .map_err(|e| {
                tracing::error!(error = %e, "the evidence archive could not be written");
                RuntimeError::Internal("the evidence archive could not be written")
            })?;
        Ok((name, sha))
    }
}

/// Whether `due` makes an archive now: it is large enough, or its oldest record has been past
/// retention for the policy's longest wait. A batch that fills one archive is always ready.
fn batch_ready(due: &DueEvidence, policy: &super::RetentionPolicy, now: i64) -> bool {
    let records = due.audit.len() + due.chains.len();
    if records >= policy.archive_min_records as usize
        || due.audit.len() >= MAX_AUDIT_PER_ARCHIVE as usize
        || due.chains.len() >= MAX_CHAINS_PER_ARCHIVE as usize
    {
        return true;
    }
    let wait = i64::try_from(policy.archive_max_wait_ms).unwrap_or(i64::MAX);
    // When each record became due: its time plus its retention (a chain by its last receipt,
    // which is written when its action ends).
    let due_at = |at: i64, keep: Option<u64>| {
        at.saturating_add(keep.map_or(0, |ms| i64::try_from(ms).unwrap_or(i64::MAX)))
    };
    let audit = due
        .audit
        .iter()
        .map(|a| due_at(a.occurred_at_ms, policy.audit_ms));
    let chains = due.chains.iter().filter_map(|c| {
        c.receipts
            .last()
            .map(|r| due_at(r.created_at_ms, policy.receipts_ms))
    });
    audit
        .chain(chains)
        .min()
        .is_some_and(|first| first.saturating_add(wait) <= now)
}

/// Temporary file, sync, rename, directory sync: the archive is whole on disk or absent.
fn write_durably(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::create_dir_all(dir)?;
    let tmp: PathBuf = dir.join(format!(".{name}.tmp"));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, dir.join(name))?;
    std::fs::File::open(dir)?.sync_all()
}

fn audit_json(a: &AuditRecord) -> Result<Value, RuntimeError> {
    Ok(json!({
        "id": a.audit_id, "sequence": a.sequence, "tenant": a.tenant, "actor": a.actor,
        "action": a.action_label, "action_id": a.action_id, "session_id": a.session_id,
        "occurred_at": views::ts(a.occurred_at_ms)?, "data": a.data,
    }))
}

fn chain_json(c: &DueChain) -> Result<Value, RuntimeError> {
    let chain = views::chain(&c.chain_id, &c.receipts)?;
    Ok(json!({
        "tenant": c.tenant,
        "principal": c.receipts.first().and_then(|r| r.principal.clone()),
        "chain": chain,
    }))
}

fn chain_purge(c: &DueChain) -> Result<ChainPurge, RuntimeError> {
    let last = c
        .receipts
        .last()
        .ok_or(RuntimeError::Internal("an empty receipt chain was due"))?;
    Ok(ChainPurge {
        tenant: c.tenant.clone(),
        chain_id: c.chain_id.clone(),
        principal: c.receipts.first().and_then(|r| r.principal.clone()),
        receipts: c.receipts.len() as u64,
        last_hash: last.hash.clone(),
        root_hash: aip_core::chain::root_hash(c.receipts.iter().map(|r| r.hash.as_str())),
    })
}

/// One `retention.purged` audit event per tenant whose evidence the batch removes.
fn purge_audit(
    due: &DueEvidence,
    archive: Option<&str>,
    sha: Option<&str>,
    now: i64,
) -> Vec<NewAudit> {
    let mut per_tenant: std::collections::BTreeMap<&str, (u64, u64)> = Default::default();
    for a in &due.audit {
        per_tenant.entry(&a.tenant).or_default().0 += 1;
    }
    for c in &due.chains {
        per_tenant.entry(&c.tenant).or_default().1 += 1;
    }
    per_tenant
        .into_iter()
        .map(|(tenant, (events, chains))| NewAudit {
            audit_id: aip_core::generate_with_prefix("aud_"),
            tenant: tenant.to_owned(),
            actor: HOUSEKEEPER.into(),
            action_label: "retention.purged".into(),
            action_id: None,
            session_id: None,
            occurred_at_ms: now,
            data: json!({
                "audit_events": events, "receipt_chains": chains,
                "archive": archive, "archive_sha256": sha,
                (crate::events::ACTOR_KIND): "system",
            }),
        })
        .collect()
}
