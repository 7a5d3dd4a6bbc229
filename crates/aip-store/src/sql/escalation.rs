//! [`EscalationStore`] in SQL: one row per escalation, resolved once by compare-and-set on its
//! version. No statement here touches an action, an approval or its decisions (spec 12.7).

use async_trait::async_trait;

use super::page::ListCursor;
use super::{Dialect, SqlStore, job, opt_part, tx_get_locked};
use crate::cursor::CursorKind;
use crate::db::{Json, Row, query};
use crate::error::{StoreError, StoreResult};
use crate::model::*;
use crate::traits::EscalationStore;

const COLUMNS: &str = "seq, tenant, escalation_id, requester, kind, state, correlation_id, session_id, \
     expires_at_ms, created_at_ms, updated_at_ms, version, body, resolver, resolution";

const SELECT_ESCALATION: &str = "SELECT seq, tenant, escalation_id, requester, kind, state, correlation_id, session_id, \
     expires_at_ms, created_at_ms, updated_at_ms, version, body, resolver, resolution \
     FROM aip_escalations WHERE tenant = $1 AND escalation_id = $2";

#[async_trait]
impl<D: Dialect> EscalationStore for SqlStore<D> {
    async fn create_escalation(
        &self,
        e: NewEscalation,
        timer: Option<NewJob>,
    ) -> StoreResult<EscalationCreated> {
        if timer.as_ref().is_some_and(|t| t.tenant != e.tenant) {
            return Err(StoreError::InvalidInput(
                "an escalation's timer belongs to its tenant",
            ));
        }
        let (tenant, id) = (e.tenant.clone(), e.escalation_id.clone());
        let written = self
            .write(true, move |tx| {
                Box::pin(async move {
                    let existing = query(SELECT_ESCALATION)
                        .bind(&e.tenant)
                        .bind(&e.escalation_id)
                        .fetch_optional(&mut *tx)
                        .await?;
                    if let Some(row) = existing {
                        return Ok(EscalationCreated::Existing(escalation_record(&row)?));
                    }
                    let row = query(format!(
                        "INSERT INTO aip_escalations (tenant, escalation_id, requester, kind, state, correlation_id, \
                         session_id, expires_at_ms, created_at_ms, updated_at_ms, version, body) \
                         VALUES ($1, $2, $3, $4, 'open', $5, $6, $7, $8, $8, 0, $9) RETURNING {COLUMNS}"
                    ))
                    .bind(&e.tenant)
                    .bind(&e.escalation_id)
                    .bind(&e.requester)
                    .bind(&e.kind)
                    .bind(e.correlation_id.as_deref())
                    .bind(e.session_id.as_deref())
                    .bind(e.expires_at_ms)
                    .bind(e.created_at_ms)
                    .bind(Json(&e.body))
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(|err| err.or_duplicate("escalation"))?;
                    if let Some(timer) = &timer {
                        job::tx_insert_job(&mut *tx, timer, None).await?;
                    }
                    Ok(EscalationCreated::Created(escalation_record(&row)?))
                })
            })
            .await;
        match written {
            // Another node stored the same id between the read and the insert.
            Err(StoreError::Duplicate { .. }) => self
                .get_escalation(&tenant, &id)
                .await?
                .map(EscalationCreated::Existing)
                .ok_or(StoreError::NotFound { kind: "escalation" }),
            other => other,
        }
    }

    async fn get_escalation(
        &self,
        tenant: &str,
        escalation_id: &str,
    ) -> StoreResult<Option<EscalationRecord>> {
        query(SELECT_ESCALATION)
            .bind(tenant)
            .bind(escalation_id)
            .fetch_optional(self.reader())
            .await?
            .as_ref()
            .map(escalation_record)
            .transpose()
    }

    async fn list_escalations(
        &self,
        q: &EscalationQuery,
        cursor: Option<&str>,
        limit: Limit,
    ) -> StoreResult<Page<EscalationRecord>> {
        let scope = vec![
            q.tenant.clone(),
            opt_part(q.requester_only.as_deref()),
            opt_part(q.state.map(EscalationState::as_str)),
            opt_part(q.requester.as_deref()),
            opt_part(q.kind.as_deref()),
        ];
        let page = ListCursor::open(&self.key, CursorKind::Escalations, scope, cursor)?;
        let found = query(format!(
            "SELECT {COLUMNS} FROM aip_escalations WHERE tenant = $1 \
             AND (CAST($2 AS TEXT) IS NULL OR requester = $2) \
             AND (CAST($3 AS TEXT) IS NULL OR state = $3) \
             AND (CAST($4 AS TEXT) IS NULL OR requester = $4) \
             AND (CAST($5 AS TEXT) IS NULL OR kind = $5) \
             AND seq > $6 ORDER BY seq LIMIT $7"
        ))
        .bind(&q.tenant)
        .bind(q.requester_only.as_deref())
        .bind(q.state.map(EscalationState::as_str))
        .bind(q.requester.as_deref())
        .bind(q.kind.as_deref())
        .bind(page.after)
        .bind(limit.as_i64())
        .fetch_all(self.reader())
        .await?;
        page.page(&found, "seq", escalation_record)
    }

    async fn resolve_escalation(&self, r: EscalationResolve) -> StoreResult<EscalationRecord> {
        if r.to.is_open() {
            return Err(StoreError::InvalidInput(
                "a resolution closes its escalation",
            ));
        }
        self.write(true, move |tx| {
            Box::pin(async move {
                let current = tx_get_locked::<D, _>(
                    &mut *tx,
                    SELECT_ESCALATION,
                    &[&r.tenant, &r.escalation_id],
                    escalation_record,
                )
                .await?
                .ok_or(StoreError::NotFound { kind: "escalation" })?;
                if current.version != r.expected_version || !current.state.is_open() {
                    return Err(StoreError::StateConflict {
                        actual: current.state.as_str().to_owned(),
                    });
                }
                if let Some(fence) = &r.finish_job {
                    job::tx_check_fence::<D>(&mut *tx, fence, r.now_ms).await?;
                    job::tx_complete(&mut *tx, fence, r.now_ms).await?;
                }
                let row = query(format!(
                    "UPDATE aip_escalations SET state = $3, resolver = $4, resolution = $5, \
                     version = version + 1, updated_at_ms = $6 \
                     WHERE tenant = $1 AND escalation_id = $2 RETURNING {COLUMNS}"
                ))
                .bind(&r.tenant)
                .bind(&r.escalation_id)
                .bind(r.to.as_str())
                .bind(r.resolver.as_deref())
                .bind(Json(&r.resolution))
                .bind(r.now_ms)
                .fetch_one(&mut *tx)
                .await?;
                escalation_record(&row)
            })
        })
        .await
    }
}

fn escalation_record(r: &Row) -> StoreResult<EscalationRecord> {
    let state: String = r.try_get("state")?;
    Ok(EscalationRecord {
        escalation_id: r.try_get("escalation_id")?,
        tenant: r.try_get("tenant")?,
        requester: r.try_get("requester")?,
        kind: r.try_get("kind")?,
        state: EscalationState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("escalation state {state}")))?,
        correlation_id: r.try_get("correlation_id")?,
        session_id: r.try_get("session_id")?,
        expires_at_ms: r.try_get("expires_at_ms")?,
        created_at_ms: r.try_get("created_at_ms")?,
        updated_at_ms: r.try_get("updated_at_ms")?,
        version: r.try_get("version")?,
        body: r.json("body")?,
        resolver: r.try_get("resolver")?,
        resolution: r.opt_json("resolution")?,
    })
}
