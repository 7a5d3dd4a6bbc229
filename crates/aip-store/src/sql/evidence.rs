//! Evidence retention in SQL: what is due (an audit prefix, whole receipt chains of ended actions),
//! and its removal in one transaction under the `purge_permit` that the append-only triggers allow
//! (migrations sqlite 13, postgres 11).

use super::housekeeping::{ended_states, raise_mark};
use super::receipt::{
    AUDIT_RETURNING, RECEIPT_COLUMNS, audit_record, receipt_record, tx_append_audit,
};
use super::{Dialect, SqlStore, to_u64};
use crate::db::{Tx, query};
use crate::error::StoreResult;
use crate::model::{
    ChainTombstone, DueChain, DueEvidence, EvidenceCutoffs, EvidencePurge, EvidencePurged,
};

/// `aip_meta` mark: the last audit position purged.
pub(super) const AUDIT_PURGED_THROUGH: &str = "audit_purged_through";

pub(super) async fn due<D: Dialect>(
    store: &SqlStore<D>,
    cutoffs: EvidenceCutoffs,
) -> StoreResult<DueEvidence> {
    let mut due = DueEvidence::default();
    if let Some(before) = cutoffs.audit_before_ms {
        // The oldest positions first, up to the first event still within retention: a prefix of
        // the listing order, read along the position index.
        let rows = query(format!(
            "SELECT {AUDIT_RETURNING}, pos FROM aip_audit WHERE pos IS NOT NULL ORDER BY pos LIMIT $1"
        ))
        .bind(i64::from(cutoffs.max_audit.clamp(1, 10_000)))
        .fetch_all(store.reader())
        .await?;
        for row in &rows {
            let record = audit_record(row)?;
            if record.occurred_at_ms >= before {
                break;
            }
            due.audit_through = Some(row.try_get::<i64>("pos")?);
            due.audit.push(record);
        }
    }
    if let Some(before) = cutoffs.receipts_before_ms {
        let ended = ended_states();
        let chains = query(format!(
            "SELECT r.tenant, r.chain_id FROM aip_receipts r JOIN aip_actions a \
             ON a.tenant = r.tenant AND a.action_id = r.chain_id \
             WHERE a.state IN ({ended}) AND a.updated_at_ms < $1 \
             GROUP BY r.tenant, r.chain_id HAVING MAX(r.created_at_ms) < $1 \
             ORDER BY MIN(r.created_at_ms) LIMIT $2"
        ))
        .bind(before)
        .bind(i64::from(cutoffs.max_chains.clamp(1, 1_000)))
        .fetch_all(store.reader())
        .await?;
        for row in &chains {
            let tenant: String = row.try_get("tenant")?;
            let chain_id: String = row.try_get("chain_id")?;
            let receipts = query(format!(
                "SELECT {RECEIPT_COLUMNS} FROM aip_receipts WHERE tenant = $1 AND chain_id = $2 ORDER BY position"
            ))
            .bind(&tenant)
            .bind(&chain_id)
            .fetch_all(store.reader())
            .await?
            .iter()
            .map(receipt_record)
            .collect::<StoreResult<Vec<_>>>()?;
            if !receipts.is_empty() {
                due.chains.push(DueChain {
                    tenant,
                    chain_id,
                    receipts,
                });
            }
        }
    }
    Ok(due)
}

pub(super) async fn purge<D: Dialect>(
    store: &SqlStore<D>,
    purge: EvidencePurge,
) -> StoreResult<EvidencePurged> {
    // Notifying: the purge's own audit events are positioned like any other.
    store
        .write(true, move |tx| {
            Box::pin(async move {
                query("INSERT INTO aip_meta (name, value) VALUES ('purge_permit', '1')")
                    .execute(&mut *tx)
                    .await?;
                let mut out = EvidencePurged::default();
                if let Some(through) = purge.audit_through {
                    out.audit =
                        query("DELETE FROM aip_audit WHERE pos IS NOT NULL AND pos <= $1")
                            .bind(through)
                            .execute(&mut *tx)
                            .await?;
                    raise_mark(&mut *tx, AUDIT_PURGED_THROUGH, through).await?;
                }
                for chain in &purge.chains {
                    if !chain_unchanged(&mut *tx, chain).await? {
                        out.chains_changed += 1;
                        continue;
                    }
                    out.receipts += query(
                        "DELETE FROM aip_receipts WHERE tenant = $1 AND chain_id = $2",
                    )
                    .bind(&chain.tenant)
                    .bind(&chain.chain_id)
                    .execute(&mut *tx)
                    .await?;
                    query(
                        "INSERT INTO aip_receipt_purges (tenant, chain_id, principal, receipts, root_hash, archive, \
                         archive_sha256, purged_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                    )
                    .bind(&chain.tenant)
                    .bind(&chain.chain_id)
                    .bind(chain.principal.as_deref())
                    .bind(i64::try_from(chain.receipts).unwrap_or(i64::MAX))
                    .bind(&chain.root_hash)
                    .bind(purge.archive.as_deref())
                    .bind(purge.archive_sha256.as_deref())
                    .bind(purge.purged_at_ms)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| e.or_duplicate("purged receipt chain"))?;
                    out.chains += 1;
                }
                for audit in &purge.audit {
                    tx_append_audit::<D>(&mut *tx, audit).await?;
                }
                query("DELETE FROM aip_meta WHERE name = 'purge_permit'")
                    .execute(&mut *tx)
                    .await?;
                Ok(out)
            })
        })
        .await
}

/// Whether a chain still holds exactly what was archived: the same number of receipts, ending at
/// the archived head.
async fn chain_unchanged(tx: &mut dyn Tx, chain: &crate::model::ChainPurge) -> StoreResult<bool> {
    let row = query(
        "SELECT COUNT(*) AS n, MAX(position) AS last FROM aip_receipts WHERE tenant = $1 AND chain_id = $2",
    )
    .bind(&chain.tenant)
    .bind(&chain.chain_id)
    .fetch_one(&mut *tx)
    .await?;
    let count = to_u64(row.try_get::<i64>("n")?, "receipt count")?;
    let Some(last) = row.try_get::<Option<i64>>("last")? else {
        return Ok(false);
    };
    let head = query(
        "SELECT hash FROM aip_receipts WHERE tenant = $1 AND chain_id = $2 AND position = $3",
    )
    .bind(&chain.tenant)
    .bind(&chain.chain_id)
    .bind(last)
    .fetch_optional(&mut *tx)
    .await?;
    Ok(count == chain.receipts
        && head
            .map(|r| r.try_get::<String>("hash"))
            .transpose()?
            .is_some_and(|h| h == chain.last_hash))
}

pub(super) async fn tombstone<D: Dialect>(
    store: &SqlStore<D>,
    tenant: &str,
    chain_id: &str,
) -> StoreResult<Option<ChainTombstone>> {
    let row = query(
        "SELECT tenant, chain_id, principal, receipts, root_hash, archive, archive_sha256, purged_at_ms \
         FROM aip_receipt_purges WHERE tenant = $1 AND chain_id = $2",
    )
    .bind(tenant)
    .bind(chain_id)
    .fetch_optional(store.reader())
    .await?;
    row.map(|r| {
        Ok(ChainTombstone {
            tenant: r.try_get("tenant")?,
            chain_id: r.try_get("chain_id")?,
            principal: r.try_get("principal")?,
            receipts: to_u64(r.try_get("receipts")?, "purged receipts")?,
            root_hash: r.try_get("root_hash")?,
            archive: r.try_get("archive")?,
            archive_sha256: r.try_get("archive_sha256")?,
            purged_at_ms: r.try_get("purged_at_ms")?,
        })
    })
    .transpose()
}

/// Whether a chain id was purged (a new chain under it would silently restart the history).
pub(super) async fn tx_chain_purged(
    tx: &mut dyn Tx,
    tenant: &str,
    chain_id: &str,
) -> StoreResult<bool> {
    Ok(
        query("SELECT 1 AS one FROM aip_receipt_purges WHERE tenant = $1 AND chain_id = $2")
            .bind(tenant)
            .bind(chain_id)
            .fetch_optional(&mut *tx)
            .await?
            .is_some(),
    )
}
