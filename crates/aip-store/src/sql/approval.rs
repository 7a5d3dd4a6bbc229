//! [`ApprovalStore`] in SQL: approval workflows, their approvers' keys (the inbox index) and their
//! append-only decisions. Approvals are created in the admission transaction of their action
//! ([`tx_insert_approval`]); every later write is compare-and-set on the approval's version and
//! moves the governed action in the same transaction.

use async_trait::async_trait;

use super::page::ListCursor;
use super::{Dialect, SqlStore, action, job, opt_part, receipt, tx_get_locked};
use crate::cursor::CursorKind;
use crate::db::{Json, Row, Tx, query};
use crate::error::{StoreError, StoreResult};
use crate::model::*;
use crate::traits::ApprovalStore;

/// Most approver keys one approval (or one reader) may carry.
pub(crate) const MAX_KEYS: usize = 64;

const COLUMNS: &str = "seq, approval_id, tenant, action_id, capability, requester, state, policy_hash, \
     expires_at_ms, created_at_ms, updated_at_ms, version, request";

const SELECT_APPROVAL: &str = "SELECT seq, approval_id, tenant, action_id, capability, requester, state, policy_hash, \
     expires_at_ms, created_at_ms, updated_at_ms, version, request \
     FROM aip_approvals WHERE tenant = $1 AND approval_id = $2";

#[async_trait]
impl<D: Dialect> ApprovalStore for SqlStore<D> {
    async fn get_approval(
        &self,
        tenant: &str,
        approval_id: &str,
    ) -> StoreResult<Option<ApprovalRecord>> {
        let row = query(SELECT_APPROVAL)
            .bind(tenant)
            .bind(approval_id)
            .fetch_optional(self.reader())
            .await?;
        match row {
            Some(row) => {
                let mut record = approval_record(&row)?;
                record.approvers = approvers(self.reader(), &record.approval_id).await?;
                Ok(Some(record))
            }
            None => Ok(None),
        }
    }

    async fn approval_of_action(
        &self,
        tenant: &str,
        action_id: &str,
    ) -> StoreResult<Option<ApprovalRecord>> {
        let row = query(format!(
            "SELECT {COLUMNS} FROM aip_approvals WHERE tenant = $1 AND action_id = $2 ORDER BY seq DESC LIMIT 1"
        ))
        .bind(tenant)
        .bind(action_id)
        .fetch_optional(self.reader())
        .await?;
        match row {
            Some(row) => {
                let mut record = approval_record(&row)?;
                record.approvers = approvers(self.reader(), &record.approval_id).await?;
                Ok(Some(record))
            }
            None => Ok(None),
        }
    }

    async fn list_decisions(
        &self,
        tenant: &str,
        approval_id: &str,
    ) -> StoreResult<Vec<DecisionRecord>> {
        let found = query(
            "SELECT d.approval_id, d.decision_id, d.approver, d.kind, d.decided_at_ms, d.body \
             FROM aip_approval_decisions d JOIN aip_approvals a ON a.approval_id = d.approval_id \
             WHERE a.tenant = $1 AND d.approval_id = $2 ORDER BY d.seq",
        )
        .bind(tenant)
        .bind(approval_id)
        .fetch_all(self.reader())
        .await?;
        found.iter().map(decision_record).collect()
    }

    async fn list_approvals(
        &self,
        q: &ApprovalQuery,
        cursor: Option<&str>,
        limit: Limit,
    ) -> StoreResult<Page<ApprovalRecord>> {
        let reader_keys = q.reader.as_ref().map(|(_, keys)| keys.as_slice());
        let filter_keys = q.approver_keys.as_deref();
        for keys in [reader_keys, filter_keys].into_iter().flatten() {
            if keys.len() > MAX_KEYS {
                return Err(StoreError::InvalidInput("too many approver keys"));
            }
        }
        let join = |keys: Option<&[String]>| {
            keys.map_or_else(|| "-".to_owned(), |k| format!("+{}", k.join("\n")))
        };
        let scope = vec![
            q.tenant.clone(),
            opt_part(q.reader.as_ref().map(|(id, _)| id.as_str())),
            join(reader_keys),
            opt_part(q.state.map(ApprovalState::as_str)),
            opt_part(q.requester.as_deref()),
            join(filter_keys),
        ];
        let page = ListCursor::open(&self.key, CursorKind::Approvals, scope, cursor)?;
        // Parameters: $1 tenant, $2 state, $3 requester, $4 after, $5 limit, $6 reader, then the
        // reader's keys and the filter's keys.
        let mut next = 7;
        let mut slots = |n: usize| {
            let list: Vec<String> = (next..next + n).map(|i| format!("${i}")).collect();
            next += n;
            list.join(", ")
        };
        let mut sql = format!(
            "SELECT {COLUMNS} FROM aip_approvals a WHERE a.tenant = $1 \
             AND (CAST($2 AS TEXT) IS NULL OR a.state = $2) \
             AND (CAST($3 AS TEXT) IS NULL OR a.requester = $3)"
        );
        if let Some(keys) = reader_keys {
            let visible = if keys.is_empty() {
                String::new()
            } else {
                format!(
                    " OR EXISTS (SELECT 1 FROM aip_approval_approvers k WHERE k.approval_id = a.approval_id AND k.key IN ({}))",
                    slots(keys.len())
                )
            };
            sql.push_str(&format!(" AND (a.requester = $6{visible})"));
        }
        if let Some(keys) = filter_keys {
            if keys.is_empty() {
                sql.push_str(" AND 1 = 0");
            } else {
                sql.push_str(&format!(
                    " AND EXISTS (SELECT 1 FROM aip_approval_approvers f WHERE f.approval_id = a.approval_id AND f.key IN ({}))",
                    slots(keys.len())
                ));
            }
        }
        sql.push_str(" AND a.seq > $4 ORDER BY a.seq LIMIT $5");
        let mut statement = query(sql)
            .bind(&q.tenant)
            .bind(q.state.map(ApprovalState::as_str))
            .bind(q.requester.as_deref())
            .bind(page.after)
            .bind(limit.as_i64())
            .bind(q.reader.as_ref().map(|(id, _)| id.as_str()));
        for key in reader_keys.into_iter().chain(filter_keys).flatten() {
            statement = statement.bind(key.as_str());
        }
        let found = statement.fetch_all(self.reader()).await?;
        let mut page = page.page(&found, "seq", approval_record)?;
        for record in &mut page.items {
            record.approvers = approvers(self.reader(), &record.approval_id).await?;
        }
        Ok(page)
    }

    async fn write_approval(&self, w: ApprovalWrite) -> StoreResult<ApprovalWritten> {
        if w.action.as_ref().is_some_and(|t| t.tenant != w.tenant) {
            return Err(StoreError::InvalidInput(
                "an approval moves only its own tenant's action",
            ));
        }
        self.write(true, move |tx| {
            Box::pin(async move {
                let current = tx_get_locked::<D, _>(
                    &mut *tx,
                    SELECT_APPROVAL,
                    &[&w.tenant, &w.approval_id],
                    approval_record,
                )
                .await?
                .ok_or(StoreError::NotFound { kind: "approval" })?;
                if let Some(d) = &w.decision {
                    let existing = query(
                        "SELECT approval_id, decision_id, approver, kind, decided_at_ms, body \
                         FROM aip_approval_decisions WHERE approval_id = $1 AND decision_id = $2",
                    )
                    .bind(&w.approval_id)
                    .bind(&d.decision_id)
                    .fetch_optional(&mut *tx)
                    .await?;
                    if let Some(row) = existing {
                        return Ok(ApprovalWritten::Replayed(decision_record(&row)?));
                    }
                }
                if current.version != w.expected_version {
                    return Err(StoreError::StateConflict {
                        actual: current.state.as_str().to_owned(),
                    });
                }
                if let Some(fence) = &w.finish_job {
                    job::tx_check_fence::<D>(&mut *tx, fence, w.now_ms).await?;
                    job::tx_complete(&mut *tx, fence, w.now_ms).await?;
                }
                if let Some(d) = &w.decision {
                    query(
                        "INSERT INTO aip_approval_decisions (approval_id, decision_id, seq, approver, kind, decided_at_ms, body) \
                         VALUES ($1, $2, (SELECT COUNT(*) FROM aip_approval_decisions WHERE approval_id = $1) + 1, $3, $4, $5, $6)",
                    )
                    .bind(&w.approval_id)
                    .bind(&d.decision_id)
                    .bind(&d.approver)
                    .bind(&d.kind)
                    .bind(d.decided_at_ms)
                    .bind(Json(&d.body))
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| e.or_duplicate("decision"))?;
                }
                let state = w.to.unwrap_or(current.state);
                let row = query(format!(
                    "UPDATE aip_approvals SET state = $3, version = version + 1, updated_at_ms = $4 \
                     WHERE tenant = $1 AND approval_id = $2 RETURNING {COLUMNS}"
                ))
                .bind(&w.tenant)
                .bind(&w.approval_id)
                .bind(state.as_str())
                .bind(w.now_ms)
                .fetch_one(&mut *tx)
                .await?;
                let mut record = approval_record(&row)?;
                if let Some(t) = &w.action {
                    action::tx_transition::<D>(&mut *tx, t).await?;
                }
                if let Some(j) = &w.job {
                    job::tx_insert_job(&mut *tx, j, None).await?;
                }
                receipt::tx_append_receipts(&mut *tx, &w.receipts).await?;
                D::append_events(&mut *tx, &w.events).await?;
                for audit in &w.audit {
                    receipt::tx_append_audit::<D>(&mut *tx, audit).await?;
                }
                record.approvers = Vec::new();
                Ok(ApprovalWritten::Written(record))
            })
        })
        .await
    }
}

/// Creates an approval and its approvers' keys inside the admission transaction of its action.
pub(super) async fn tx_insert_approval(tx: &mut dyn Tx, a: &NewApproval) -> StoreResult<()> {
    if a.approvers.len() > MAX_KEYS {
        return Err(StoreError::InvalidInput("too many approver keys"));
    }
    query(
        "INSERT INTO aip_approvals (approval_id, tenant, action_id, capability, requester, state, policy_hash, \
         expires_at_ms, created_at_ms, updated_at_ms, version, request) \
         VALUES ($1, $2, $3, $4, $5, 'pending', $6, $7, $8, $8, 0, $9)",
    )
    .bind(&a.approval_id)
    .bind(&a.tenant)
    .bind(&a.action_id)
    .bind(&a.capability)
    .bind(&a.requester)
    .bind(&a.policy_hash)
    .bind(a.expires_at_ms)
    .bind(a.created_at_ms)
    .bind(Json(&a.request))
    .execute(&mut *tx)
    .await
    .map_err(|e| e.or_duplicate("approval"))?;
    let mut keys: Vec<&str> = a.approvers.iter().map(String::as_str).collect();
    keys.sort_unstable();
    keys.dedup();
    for key in keys {
        query("INSERT INTO aip_approval_approvers (approval_id, key) VALUES ($1, $2)")
            .bind(&a.approval_id)
            .bind(key)
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

async fn approvers<P: crate::db::Pool>(reader: &P, approval_id: &str) -> StoreResult<Vec<String>> {
    let rows = query("SELECT key FROM aip_approval_approvers WHERE approval_id = $1 ORDER BY key")
        .bind(approval_id)
        .fetch_all(reader)
        .await?;
    rows.iter().map(|r| r.try_get::<String>("key")).collect()
}

fn approval_record(r: &Row) -> StoreResult<ApprovalRecord> {
    let state: String = r.try_get("state")?;
    Ok(ApprovalRecord {
        approval_id: r.try_get("approval_id")?,
        tenant: r.try_get("tenant")?,
        action_id: r.try_get("action_id")?,
        capability: r.try_get("capability")?,
        requester: r.try_get("requester")?,
        state: ApprovalState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("approval state {state}")))?,
        policy_hash: r.try_get("policy_hash")?,
        expires_at_ms: r.try_get("expires_at_ms")?,
        created_at_ms: r.try_get("created_at_ms")?,
        updated_at_ms: r.try_get("updated_at_ms")?,
        version: r.try_get("version")?,
        request: r.json("request")?,
        approvers: Vec::new(),
    })
}

fn decision_record(r: &Row) -> StoreResult<DecisionRecord> {
    Ok(DecisionRecord {
        approval_id: r.try_get("approval_id")?,
        decision_id: r.try_get("decision_id")?,
        approver: r.try_get("approver")?,
        kind: r.try_get("kind")?,
        decided_at_ms: r.try_get("decided_at_ms")?,
        body: r.json("body")?,
    })
}
