//! Job-claim polls against a history of finished jobs (spec 13.4): an idle worker's claim (nothing
//! due) on a queue that holds 1k, 100k and 1M finished jobs, on SQLite.
//!
//! - `store_claim`: `Store::claim` end to end (its write transaction included).
//! - `picks`: the claim's two picks ([`CLAIM_PICKS`]) as plain reads.
//! - `or_pick` (the baseline, same run, same rows): the single pick claims used before the
//!   claimable-job indexes, `(ready and due) OR (leased and lapsed)`, on a copy of the store with
//!   the index it had then, `(queue, state, available_at_ms)`. As in production, neither database
//!   is `ANALYZE`d (the embedded store never runs it), so SQLite plans on its defaults.
//!
//! `cargo bench -p aip-store --bench claim_poll`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::time::Duration;

use aip_store::*;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use sqlx::{AssertSqlSafe, Connection as _, SqliteConnection};

const NOW: i64 = 1_700_000_000_000;

/// The pick claims made before migration 18 (the baseline).
const OR_PICK: &str = "SELECT job_id FROM aip_jobs WHERE queue = 'actions' AND attempts < max_attempts \
    AND ((state = 'ready' AND available_at_ms <= $1) OR (state = 'leased' AND lease_expires_at_ms <= $1)) \
    ORDER BY available_at_ms, job_id LIMIT 1";

/// Writes `n` finished jobs (one in ten dead) into the store file at `path`.
async fn finished_jobs(path: &Path, n: u64) {
    let mut c = SqliteConnection::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let sql = format!(
        "INSERT INTO aip_jobs (job_id, queue, action_id, tenant, state, available_at_ms, attempts, max_attempts, \
         fence, created_at_ms, updated_at_ms, payload) \
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {n}) \
         SELECT 'done-' || i, 'actions', NULL, 't1', CASE WHEN i % 10 = 0 THEN 'dead' ELSE 'done' END, \
         {NOW} - {n} + i, 1, 3, 1, {NOW}, {NOW}, '{{}}' FROM n"
    );
    sqlx::query(AssertSqlSafe(sql))
        .execute(&mut c)
        .await
        .unwrap();
    sqlx::query("ANALYZE").execute(&mut c).await.unwrap();
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("aip-claim-bench-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut group = c.benchmark_group("claim_poll");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(4))
        .warm_up_time(Duration::from_secs(1));
    for n in [1_000u64, 100_000, 1_000_000] {
        let store_path = dir.join(format!("store-{n}.db"));
        let base_path = dir.join(format!("baseline-{n}.db"));
        let (store, mut reads, mut base) = rt.block_on(async {
            let store = SqliteStore::open(&store_path).await.unwrap();
            finished_jobs(&store_path, n).await;
            // The baseline: a store of its own with the same rows, then the earlier index.
            drop(SqliteStore::open(&base_path).await.unwrap());
            finished_jobs(&base_path, n).await;
            let mut base = SqliteConnection::connect(&format!("sqlite://{}", base_path.display()))
                .await
                .unwrap();
            for sql in [
                "DROP INDEX aip_jobs_claimable",
                "DROP INDEX aip_jobs_expiring",
                "CREATE INDEX aip_jobs_ready ON aip_jobs (queue, state, available_at_ms)",
            ] {
                sqlx::query(sql).execute(&mut base).await.unwrap();
            }
            let reads = SqliteConnection::connect(&format!("sqlite://{}", store_path.display()))
                .await
                .unwrap();
            (store, reads, base)
        });
        let worker = WorkerId::fresh();
        group.bench_function(BenchmarkId::new("store_claim", n), |b| {
            b.iter(|| {
                let got = rt
                    .block_on(store.claim("actions", &worker, NOW, 30_000))
                    .unwrap();
                assert!(got.is_none());
            })
        });
        let picks = CLAIM_PICKS.map(|p| p.replace("$4", "'actions'").replace("$3", "$1"));
        group.bench_function(BenchmarkId::new("picks", n), |b| {
            b.iter(|| {
                rt.block_on(async {
                    for pick in &picks {
                        let row = sqlx::query(AssertSqlSafe(pick.clone()))
                            .bind(NOW)
                            .fetch_optional(&mut reads)
                            .await
                            .unwrap();
                        assert!(row.is_none());
                    }
                })
            })
        });
        group.bench_function(BenchmarkId::new("or_pick", n), |b| {
            b.iter(|| {
                let row = rt
                    .block_on(sqlx::query(OR_PICK).bind(NOW).fetch_optional(&mut base))
                    .unwrap();
                assert!(row.is_none());
            })
        });
    }
    group.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, bench);
criterion_main!(benches);
