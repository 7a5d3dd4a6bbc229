//! [`ReceiptStore`] in SQL: hash-chained receipts that never fork, and the append-only audit log
//! (spec 18).

use async_trait::async_trait;

use super::page::ListCursor;
use super::{Dialect, MAX_ROWS, SqlStore, opt_part, to_u64, values_list};
use crate::cursor::CursorKind;
use crate::db::{Json, Row, Tx, query};
use crate::error::{StoreError, StoreResult};
use crate::model::*;
use crate::traits::ReceiptStore;

#[async_trait]
impl<D: Dialect> ReceiptStore for SqlStore<D> {
    async fn append_receipt(&self, receipt: NewReceipt) -> StoreResult<ReceiptRecord> {
        self.write(false, move |tx| {
            Box::pin(async move {
                // A purged chain is never restarted under the same id. Only this path can reach
                // one: retention purges chains of ended actions, which admissions (new ids),
                // transitions (live actions only), approvals, deliveries and settlements never
                // append to; appends after the end (a delegation's reconciliation) come here.
                if receipt.previous_hash.is_none()
                    && super::evidence::tx_chain_purged(
                        &mut *tx,
                        &receipt.tenant,
                        &receipt.chain_id,
                    )
                    .await?
                {
                    return Err(StoreError::ReceiptChainConflict {
                        chain_id: receipt.chain_id.clone(),
                    });
                }
                let position = tx_append_receipts(&mut *tx, std::slice::from_ref(&receipt)).await?;
                let position = position
                    .first()
                    .copied()
                    .ok_or_else(|| StoreError::Corrupt("receipt without a position".into()))?;
                Ok(ReceiptRecord {
                    position: to_u64(position, "receipt position")?,
                    receipt_id: receipt.receipt_id,
                    chain_id: receipt.chain_id,
                    tenant: receipt.tenant,
                    principal: receipt.principal,
                    action_id: receipt.action_id,
                    receipt_type: receipt.receipt_type,
                    hash: receipt.hash,
                    previous_hash: receipt.previous_hash,
                    created_at_ms: receipt.created_at_ms,
                    body: receipt.body,
                })
            })
        })
        .await
    }

    async fn list_receipts(
        &self,
        tenant: &str,
        chain_id: &str,
        limit: Limit,
    ) -> StoreResult<Vec<ReceiptRecord>> {
        let found = query(
            format!(
            "SELECT {RECEIPT_COLUMNS} FROM aip_receipts WHERE tenant = $3 AND chain_id = $1 ORDER BY position LIMIT $2"
        ))
        .bind(chain_id)
        .bind(limit.as_i64())
        .bind(tenant)
        .fetch_all(self.reader())
        .await?;
        found.iter().map(receipt_record).collect()
    }

    async fn get_receipt(
        &self,
        tenant: &str,
        receipt_id: &str,
    ) -> StoreResult<Option<ReceiptRecord>> {
        let row = query(format!(
            "SELECT {RECEIPT_COLUMNS} FROM aip_receipts WHERE tenant = $1 AND receipt_id = $2"
        ))
        .bind(tenant)
        .bind(receipt_id)
        .fetch_optional(self.reader())
        .await?;
        row.as_ref().map(receipt_record).transpose()
    }

    async fn append_audit(&self, a: NewAudit) -> StoreResult<AuditRecord> {
        // Notifying: on PostgreSQL the sequencer then positions the event before this answers.
        self.write(true, move |tx| {
            Box::pin(async move { tx_append_audit::<D>(&mut *tx, &a).await })
        })
        .await
    }

    async fn list_audit(
        &self,
        q: &AuditQuery,
        cursor: Option<&str>,
        limit: Limit,
    ) -> StoreResult<Page<AuditRecord>> {
        let mut scope = vec![q.tenant.clone(), opt_part(q.actor.as_deref())];
        // Cursors of queries without the later filters keep their scope.
        if q.action_id.is_some()
            || q.session_id.is_some()
            || q.from_ms.is_some()
            || q.to_ms.is_some()
            || q.transaction_id.is_some()
        {
            scope.extend([
                opt_part(q.action_id.as_deref()),
                opt_part(q.session_id.as_deref()),
                opt_part(q.from_ms.map(|t| t.to_string()).as_deref()),
                opt_part(q.to_ms.map(|t| t.to_string()).as_deref()),
            ]);
        }
        if q.transaction_id.is_some() {
            scope.push(opt_part(q.transaction_id.as_deref()));
        }
        let page = ListCursor::open(&self.key, CursorKind::Audit, scope, cursor)?;
        // A cursor before the purge horizon would silently skip purged audit events (spec 16.2).
        if page.after > 0
            && super::housekeeping::mark(self, super::evidence::AUDIT_PURGED_THROUGH)
                .await?
                .is_some_and(|horizon| page.after < horizon)
        {
            return Err(StoreError::CursorExpired);
        }
        let found = query(list_audit_sql(q.session_id.is_some()))
            .bind(&q.tenant)
            .bind(q.actor.as_deref())
            .bind(page.after)
            .bind(limit.as_i64())
            .bind(q.action_id.as_deref())
            .bind(q.session_id.as_deref())
            .bind(q.from_ms)
            .bind(q.to_ms)
            .bind(q.transaction_id.as_deref())
            .fetch_all(self.reader())
            .await?;
        page.page(&found, "pos", audit_record)
    }
}

/// Appends receipts that must extend their chains exactly; returns their positions. Each run of one
/// chain costs one read of the chain's head (none for a new chain, whose receipts start at position
/// 0, which the insert finds taken if the chain exists) and one multi-row insert; only a collision
/// costs more (to tell a duplicate from a fork).
pub(super) async fn tx_append_receipts(
    tx: &mut dyn Tx,
    receipts: &[NewReceipt],
) -> StoreResult<Vec<i64>> {
    let mut positions = Vec::with_capacity(receipts.len());
    let mut rest = receipts;
    while let Some(first) = rest.first() {
        let run = rest
            .iter()
            .take_while(|r| r.chain_id == first.chain_id && r.tenant == first.tenant)
            .count()
            .min(MAX_ROWS);
        let (chunk, tail) = rest.split_at(run);
        rest = tail;
        let conflict = || StoreError::ReceiptChainConflict {
            chain_id: first.chain_id.clone(),
        };
        let start: i64 = match first.previous_hash.as_deref() {
            None => 0,
            Some(prev) => {
                let last = query(
                    "SELECT position, hash FROM aip_receipts WHERE tenant = $2 AND chain_id = $1 ORDER BY position DESC LIMIT 1",
                )
                .bind(&first.chain_id)
                .bind(&first.tenant)
                .fetch_optional(&mut *tx)
                .await?;
                match last {
                    Some(row) if row.try_get::<String>("hash")? == prev => {
                        row.try_get::<i64>("position")? + 1
                    }
                    _ => return Err(conflict()),
                }
            }
        };
        if chunk
            .windows(2)
            .any(|w| w[1].previous_hash.as_deref() != Some(w[0].hash.as_str()))
        {
            return Err(conflict());
        }
        let sql = format!(
            "INSERT INTO aip_receipts (receipt_id, chain_id, position, tenant, principal, action_id, receipt_type, hash, previous_hash, created_at_ms, body) \
             VALUES {} ON CONFLICT DO NOTHING RETURNING receipt_id",
            values_list(chunk.len(), 11)
        );
        let mut q = query(sql);
        for (r, position) in chunk.iter().zip(start..) {
            q = q
                .bind(&r.receipt_id)
                .bind(&r.chain_id)
                .bind(position)
                .bind(&r.tenant)
                .bind(r.principal.as_deref())
                .bind(r.action_id.as_deref())
                .bind(&r.receipt_type)
                .bind(&r.hash)
                .bind(r.previous_hash.as_deref())
                .bind(r.created_at_ms)
                .bind(Json(&r.body));
            positions.push(position);
        }
        let inserted = q.fetch_all(&mut *tx).await?;
        if inserted.len() < chunk.len() {
            // A reused receipt id is a duplicate; any other collision is a position that another
            // writer took first: a fork.
            let got = inserted
                .iter()
                .map(|row| row.try_get::<String>("receipt_id"))
                .collect::<Result<std::collections::HashSet<_>, _>>()?;
            for r in chunk.iter().filter(|r| !got.contains(&r.receipt_id)) {
                let exists = query("SELECT 1 AS one FROM aip_receipts WHERE receipt_id = $1")
                    .bind(&r.receipt_id)
                    .fetch_optional(&mut *tx)
                    .await?;
                if exists.is_some() {
                    return Err(StoreError::Duplicate { kind: "receipt" });
                }
            }
            return Err(conflict());
        }
    }
    Ok(positions)
}

/// The columns [`receipt_record`] reads.
pub(super) const RECEIPT_COLUMNS: &str = "receipt_id, chain_id, position, tenant, principal, action_id, receipt_type, hash, previous_hash, created_at_ms, body";

pub(super) fn receipt_record(r: &Row) -> StoreResult<ReceiptRecord> {
    Ok(ReceiptRecord {
        receipt_id: r.try_get("receipt_id")?,
        chain_id: r.try_get("chain_id")?,
        position: to_u64(r.try_get("position")?, "receipt position")?,
        tenant: r.try_get("tenant")?,
        principal: r.try_get("principal")?,
        action_id: r.try_get("action_id")?,
        receipt_type: r.try_get("receipt_type")?,
        hash: r.try_get("hash")?,
        previous_hash: r.try_get("previous_hash")?,
        created_at_ms: r.try_get("created_at_ms")?,
        body: r.json("body")?,
    })
}

pub(crate) fn audit_record(r: &Row) -> StoreResult<AuditRecord> {
    Ok(AuditRecord {
        sequence: to_u64(r.try_get("seq")?, "audit sequence")?,
        audit_id: r.try_get("audit_id")?,
        tenant: r.try_get("tenant")?,
        actor: r.try_get("actor")?,
        action_label: r.try_get("action_label")?,
        action_id: r.try_get("action_id")?,
        session_id: r.try_get("session_id")?,
        occurred_at_ms: r.try_get("occurred_at_ms")?,
        data: r.json("data")?,
    })
}

/// Appends an audit event inside a caller's write transaction, so the transition it records and
/// its audit line commit together (spec 18.3: audit is not best effort).
pub(super) async fn tx_append_audit<D: Dialect>(
    tx: &mut dyn Tx,
    a: &NewAudit,
) -> StoreResult<AuditRecord> {
    D::append_audit(tx, a).await
}

/// The columns an audit insert returns ([`audit_record`] reads them).
pub(crate) const AUDIT_RETURNING: &str =
    "seq, audit_id, tenant, actor, action_label, occurred_at_ms, data, action_id, session_id";

/// Binds an audit event's eight columns (`audit_id` .. `session_id`, in table order) to `q`.
pub(crate) fn bind_audit<'q>(q: crate::db::Stmt<'q>, a: &'q NewAudit) -> crate::db::Stmt<'q> {
    q.bind(&a.audit_id)
        .bind(&a.tenant)
        .bind(&a.actor)
        .bind(&a.action_label)
        .bind(a.occurred_at_ms)
        .bind(Json(&a.data))
        .bind(a.action_id.as_deref())
        .bind(a.session_id.as_deref())
}

/// The audit listing (parameters: tenant, actor, after, limit, action, session, from, to,
/// transaction); the session term only when `session` (see [`super::session_filter`]).
pub(super) fn list_audit_sql(session: bool) -> String {
    let session = super::session_filter(6, session);
    format!(
        "SELECT seq, pos, audit_id, tenant, actor, action_label, occurred_at_ms, data, action_id, session_id FROM aip_audit \
         WHERE tenant = $1 AND (CAST($2 AS TEXT) IS NULL OR actor = $2) \
         AND (CAST($5 AS TEXT) IS NULL OR action_id = $5) \
         AND {session} \
         AND (CAST($7 AS BIGINT) IS NULL OR occurred_at_ms >= $7) \
         AND (CAST($8 AS BIGINT) IS NULL OR occurred_at_ms <= $8) \
         AND (CAST($9 AS TEXT) IS NULL OR EXISTS (SELECT 1 FROM aip_transaction_actions l \
              WHERE l.tenant = aip_audit.tenant AND l.action_id = aip_audit.action_id AND l.transaction_id = $9)) \
         AND pos IS NOT NULL AND pos > $3 ORDER BY pos LIMIT $4",
    )
}
