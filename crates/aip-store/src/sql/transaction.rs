//! [`TransactionStore`] in SQL: the transaction row and its action links. Rows are written only by
//! [`tx_link`], inside an action's admission transaction, so the claim of spec 13.4 (one commit owns
//! a plan) is the same compare-and-set that admits the commit: a lost race admits nothing.

use async_trait::async_trait;

use super::{Dialect, SqlStore};
use crate::db::{Json, Row, Tx, query};
use crate::error::{StoreError, StoreResult};
use crate::model::*;
use crate::traits::TransactionStore;

const COLUMNS: &str = "tenant, transaction_id, capability, principal, plan_id, plan, plan_expires_at_ms, operation, \
     dry_run_action_id, plan_action_id, commit_action_id, reconcile_action_id, compensation_action_id, \
     created_at_ms, updated_at_ms, version";

#[async_trait]
impl<D: Dialect> TransactionStore for SqlStore<D> {
    async fn get_transaction(
        &self,
        tenant: &str,
        transaction_id: &str,
    ) -> StoreResult<Option<TransactionRecord>> {
        let row = query(format!(
            "SELECT {COLUMNS} FROM aip_transactions WHERE tenant = $1 AND transaction_id = $2"
        ))
        .bind(tenant)
        .bind(transaction_id)
        .fetch_optional(self.reader())
        .await?;
        row.as_ref().map(transaction_record).transpose()
    }

    async fn transaction_by_plan(
        &self,
        tenant: &str,
        plan_id: &str,
    ) -> StoreResult<Option<TransactionRecord>> {
        let row = query(format!(
            "SELECT {COLUMNS} FROM aip_transactions WHERE tenant = $1 AND plan_id = $2"
        ))
        .bind(tenant)
        .bind(plan_id)
        .fetch_optional(self.reader())
        .await?;
        row.as_ref().map(transaction_record).transpose()
    }

    async fn transaction_of_action(
        &self,
        tenant: &str,
        action_id: &str,
    ) -> StoreResult<Option<(TransactionRecord, TransactionRole)>> {
        let link = query(
            "SELECT transaction_id, role FROM aip_transaction_actions WHERE tenant = $1 AND action_id = $2",
        )
        .bind(tenant)
        .bind(action_id)
        .fetch_optional(self.reader())
        .await?;
        let Some(link) = link else {
            return Ok(None);
        };
        let role: String = link.try_get("role")?;
        let role = TransactionRole::parse(&role)
            .ok_or_else(|| StoreError::Corrupt(format!("transaction role {role}")))?;
        let transaction_id: String = link.try_get("transaction_id")?;
        let record = self
            .get_transaction(tenant, &transaction_id)
            .await?
            .ok_or_else(|| {
                StoreError::Corrupt(format!(
                    "action {action_id} links to missing transaction {transaction_id}"
                ))
            })?;
        Ok(Some((record, role)))
    }
}

/// Creates or claims `link`'s transaction for `tenant`'s admitted action, and records the link.
/// A transaction that exists when it should be new, or moved past `expected_version`, is
/// [`StoreError::StateConflict`]: the caller's whole admission rolls back.
pub(super) async fn tx_link(
    tx: &mut dyn Tx,
    tenant: &str,
    action_id: &str,
    link: &TransactionLink,
    now_ms: i64,
) -> StoreResult<()> {
    let (plan_id, plan, expires) = match &link.plan {
        Some((id, plan, expires)) => (Some(id.as_str()), Some(plan), *expires),
        None => (None, None, None),
    };
    if (link.role == TransactionRole::Plan) != plan.is_some() {
        return Err(StoreError::InvalidInput(
            "a plan is linked exactly by its plan action",
        ));
    }
    let conflict = |actual: &str| StoreError::StateConflict {
        actual: actual.to_owned(),
    };
    match link.expected_version {
        None => {
            if matches!(
                link.role,
                TransactionRole::Commit | TransactionRole::Reconcile | TransactionRole::Compensate
            ) {
                return Err(StoreError::InvalidInput(
                    "commit, reconcile and compensation join an existing transaction",
                ));
            }
            let column = role_column(link.role);
            query(format!(
                "INSERT INTO aip_transactions (tenant, transaction_id, capability, principal, plan_id, plan, \
                 plan_expires_at_ms, operation, {column}, created_at_ms, updated_at_ms, version) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, 0)"
            ))
            .bind(tenant)
            .bind(&link.transaction_id)
            .bind(&link.capability)
            .bind(&link.principal)
            .bind(plan_id)
            .bind(plan.map(Json))
            .bind(expires)
            .bind(link.operation.as_ref().map(Json))
            .bind(action_id)
            .bind(now_ms)
            .execute(&mut *tx)
            .await
            .map_err(|e| match e.or_duplicate("transaction") {
                StoreError::Duplicate { .. } => conflict("exists"),
                other => other,
            })?;
        }
        Some(version) => {
            let column = role_column(link.role);
            // A new commit supersedes the reconciliation of the commit before it.
            let clear = if matches!(
                link.role,
                TransactionRole::Commit | TransactionRole::Execute
            ) {
                ", reconcile_action_id = NULL"
            } else {
                ""
            };
            let sql = format!(
                "UPDATE aip_transactions SET {column} = $3, version = version + 1, updated_at_ms = $4, \
                 plan_id = COALESCE($5, plan_id), plan = COALESCE($6, plan), \
                 plan_expires_at_ms = COALESCE($7, plan_expires_at_ms), operation = COALESCE($8, operation){clear} \
                 WHERE tenant = $1 AND transaction_id = $2 AND version = $9"
            );
            let changed = query(sql)
                .bind(tenant)
                .bind(&link.transaction_id)
                .bind(action_id)
                .bind(now_ms)
                .bind(plan_id)
                .bind(plan.map(Json))
                .bind(expires)
                .bind(link.operation.as_ref().map(Json))
                .bind(version)
                .execute(&mut *tx)
                .await
                .map_err(|e| match e.or_duplicate("plan") {
                    StoreError::Duplicate { .. } => conflict("plan exists"),
                    other => other,
                })?;
            if changed != 1 {
                return Err(conflict("moved"));
            }
        }
    }
    query(
        "INSERT INTO aip_transaction_actions (tenant, action_id, transaction_id, role) VALUES ($1, $2, $3, $4)",
    )
    .bind(tenant)
    .bind(action_id)
    .bind(&link.transaction_id)
    .bind(link.role.as_str())
    .execute(&mut *tx)
    .await
    .map_err(|e| e.or_duplicate("action"))?;
    Ok(())
}

/// Records the provider operation `action_id`'s provider reported, when that action is still its
/// transaction's commit (a version bump, so a reconciliation admitted against the old reference
/// conflicts instead).
pub(super) async fn tx_report_operation(
    tx: &mut dyn Tx,
    tenant: &str,
    action_id: &str,
    reported: &ReportedOperation,
    now_ms: i64,
) -> StoreResult<()> {
    query(
        "UPDATE aip_transactions SET operation = $4, version = version + 1, updated_at_ms = $5 \
         WHERE tenant = $1 AND transaction_id = $2 AND commit_action_id = $3",
    )
    .bind(tenant)
    .bind(&reported.transaction_id)
    .bind(action_id)
    .bind(Json(&reported.operation))
    .bind(now_ms)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// The column naming the action in `role` (a fixed identifier, never input).
fn role_column(role: TransactionRole) -> &'static str {
    match role {
        TransactionRole::DryRun => "dry_run_action_id",
        TransactionRole::Plan => "plan_action_id",
        TransactionRole::Execute | TransactionRole::Commit => "commit_action_id",
        TransactionRole::Reconcile => "reconcile_action_id",
        TransactionRole::Compensate => "compensation_action_id",
    }
}

fn transaction_record(r: &Row) -> StoreResult<TransactionRecord> {
    Ok(TransactionRecord {
        tenant: r.try_get("tenant")?,
        transaction_id: r.try_get("transaction_id")?,
        capability: r.try_get("capability")?,
        principal: r.try_get("principal")?,
        plan_id: r.try_get("plan_id")?,
        plan: r.opt_json("plan")?,
        plan_expires_at_ms: r.try_get("plan_expires_at_ms")?,
        operation: r.opt_json("operation")?,
        dry_run_action_id: r.try_get("dry_run_action_id")?,
        plan_action_id: r.try_get("plan_action_id")?,
        commit_action_id: r.try_get("commit_action_id")?,
        reconcile_action_id: r.try_get("reconcile_action_id")?,
        compensation_action_id: r.try_get("compensation_action_id")?,
        created_at_ms: r.try_get("created_at_ms")?,
        updated_at_ms: r.try_get("updated_at_ms")?,
        version: r.try_get("version")?,
    })
}
