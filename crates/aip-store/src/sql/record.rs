//! [`RecordStore`] in SQL: application records.

use async_trait::async_trait;

use super::{Dialect, SqlStore, job, to_u64};
use crate::db::{Json, Row, Tx, query};
use crate::error::StoreResult;
use crate::model::{AppRecord, Fence, Limit};
use crate::traits::RecordStore;

#[async_trait]
impl<D: Dialect> RecordStore for SqlStore<D> {
    async fn insert_record(&self, r: AppRecord) -> StoreResult<()> {
        self.write(false, move |tx| {
            Box::pin(async move { tx_insert(tx, &r).await })
        })
        .await
    }

    async fn insert_record_fenced(
        &self,
        r: AppRecord,
        fence: &Fence,
        now_ms: i64,
    ) -> StoreResult<()> {
        let fence = fence.clone();
        self.write(false, move |tx| {
            Box::pin(async move {
                job::tx_check_fence::<D>(&mut *tx, &fence, now_ms).await?;
                tx_insert(tx, &r).await
            })
        })
        .await
    }

    async fn get_record(
        &self,
        collection: &str,
        tenant: &str,
        record_id: &str,
    ) -> StoreResult<Option<AppRecord>> {
        let row = query(
            "SELECT collection, record_id, tenant, created_at_ms, body FROM aip_records \
             WHERE collection = $1 AND tenant = $2 AND record_id = $3",
        )
        .bind(collection)
        .bind(tenant)
        .bind(record_id)
        .fetch_optional(self.reader())
        .await?;
        row.as_ref().map(app_record).transpose()
    }

    async fn list_records(
        &self,
        collection: &str,
        tenant: &str,
        limit: Limit,
    ) -> StoreResult<Vec<AppRecord>> {
        let found = query(
            "SELECT collection, record_id, tenant, created_at_ms, body FROM aip_records \
             WHERE collection = $1 AND tenant = $2 ORDER BY created_at_ms, record_id LIMIT $3",
        )
        .bind(collection)
        .bind(tenant)
        .bind(limit.as_i64())
        .fetch_all(self.reader())
        .await?;
        found.iter().map(app_record).collect()
    }

    async fn count_records(&self, collection: &str, tenant: &str) -> StoreResult<u64> {
        let row =
            query("SELECT COUNT(*) AS n FROM aip_records WHERE collection = $1 AND tenant = $2")
                .bind(collection)
                .bind(tenant)
                .fetch_one(self.reader())
                .await?;
        to_u64(row.try_get("n")?, "record count")
    }
}

async fn tx_insert(tx: &mut dyn Tx, r: &AppRecord) -> StoreResult<()> {
    query(
        "INSERT INTO aip_records (collection, record_id, tenant, created_at_ms, body) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&r.collection)
    .bind(&r.record_id)
    .bind(&r.tenant)
    .bind(r.created_at_ms)
    .bind(Json(&r.body))
    .execute(&mut *tx)
    .await
    .map_err(|e| e.or_duplicate("record"))?;
    Ok(())
}

fn app_record(r: &Row) -> StoreResult<AppRecord> {
    Ok(AppRecord {
        collection: r.try_get("collection")?,
        record_id: r.try_get("record_id")?,
        tenant: r.try_get("tenant")?,
        created_at_ms: r.try_get("created_at_ms")?,
        body: r.json("body")?,
    })
}
