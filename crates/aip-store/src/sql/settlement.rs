//! [`SettlementStore`] in SQL: settlement batches (spec 18.4). A batch claims each action it settles
//! (one row per action, unique per tenant), so no completed action is settled twice, and its
//! receipts and audit event commit with it.

use async_trait::async_trait;

use super::{Dialect, SqlStore, receipt};
use crate::db::{Json, Row, query};
use crate::error::{StoreError, StoreResult};
use crate::model::*;
use crate::traits::SettlementStore;

#[async_trait]
impl<D: Dialect> SettlementStore for SqlStore<D> {
    async fn unsettled_actions(
        &self,
        tenant: &str,
        capabilities: &[String],
        limit: Limit,
    ) -> StoreResult<Vec<ActionRecord>> {
        if capabilities.is_empty() {
            return Ok(Vec::new());
        }
        if capabilities.len() > 1000 {
            return Err(StoreError::InvalidInput("too many settled capabilities"));
        }
        let slots: Vec<String> = (0..capabilities.len())
            .map(|i| format!("${}", i + 3))
            .collect();
        let sql = format!(
            "{} WHERE a.tenant = $1 AND a.state = 'completed' AND a.capability IN ({}) \
             AND NOT EXISTS (SELECT 1 FROM aip_settlement_items i WHERE i.tenant = a.tenant AND i.action_id = a.action_id) \
             ORDER BY a.seq LIMIT $2",
            super::action::SELECT_ACTIONS_AS_A,
            slots.join(", ")
        );
        let mut statement = query(sql).bind(tenant).bind(limit.as_i64());
        for c in capabilities {
            statement = statement.bind(c);
        }
        let rows = statement.fetch_all(self.reader()).await?;
        rows.iter().map(super::action::action_record).collect()
    }

    async fn record_settlement(&self, batch: NewSettlement) -> StoreResult<SettlementRecord> {
        self.write(true, move |tx| {
            Box::pin(async move {
                let row = query(
                    "INSERT INTO aip_settlement_batches (batch_id, tenant, model, body, created_at_ms) \
                     VALUES ($1, $2, $3, $4, $5) RETURNING batch_id, tenant, model, body, created_at_ms",
                )
                .bind(&batch.batch_id)
                .bind(&batch.tenant)
                .bind(&batch.model)
                .bind(Json(&batch.body))
                .bind(batch.now_ms)
                .fetch_one(&mut *tx)
                .await
                .map_err(|e| e.or_duplicate("settlement batch"))?;
                for action_id in &batch.action_ids {
                    query(
                        "INSERT INTO aip_settlement_items (tenant, action_id, batch_id) VALUES ($1, $2, $3)",
                    )
                    .bind(&batch.tenant)
                    .bind(action_id)
                    .bind(&batch.batch_id)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| e.or_duplicate("settled action"))?;
                }
                receipt::tx_append_receipts(&mut *tx, &batch.receipts).await?;
                receipt::tx_append_audit::<D>(&mut *tx, &batch.audit).await?;
                settlement_record(&row)
            })
        })
        .await
    }

    async fn get_settlement(
        &self,
        tenant: &str,
        batch_id: &str,
    ) -> StoreResult<Option<SettlementRecord>> {
        let row = query(
            "SELECT batch_id, tenant, model, body, created_at_ms FROM aip_settlement_batches \
             WHERE tenant = $1 AND batch_id = $2",
        )
        .bind(tenant)
        .bind(batch_id)
        .fetch_optional(self.reader())
        .await?;
        row.as_ref().map(settlement_record).transpose()
    }
}

fn settlement_record(r: &Row) -> StoreResult<SettlementRecord> {
    Ok(SettlementRecord {
        batch_id: r.try_get("batch_id")?,
        tenant: r.try_get("tenant")?,
        model: r.try_get("model")?,
        body: r.json("body")?,
        created_at_ms: r.try_get("created_at_ms")?,
    })
}
