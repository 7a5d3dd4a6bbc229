//! Admission throughput: one `Store::admit` per action (action row + idempotency reservation + two
//! receipts + one event, as a sync action is admitted), at concurrency 1 and 16, on SQLite and
//! (when `AIP_TEST_POSTGRES_URL` is set) PostgreSQL. The baseline in the same run is one plain
//! single-row INSERT transaction per action on the same database with the same durability settings.
//! `store_admit_audited` adds the admission's audit event (spec 18.3), as the runtime writes it: its
//! sequence is one counter row, so this shows what that serialization costs under concurrency.
//!
//! `cargo bench -p aip-store --bench admission`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aip_store::*;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use sqlx::{AssertSqlSafe, Connection as _};

static NEXT: AtomicU64 = AtomicU64::new(0);

fn admission(run: &str, audited: bool) -> Admission {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let id = format!("{run}-a{n}");
    Admission {
        action: NewAction {
            action_id: id.clone(),
            tenant: "t1".into(),
            principal: "alice".into(),
            session_id: None,
            capability: "cap:demo:echo".into(),
            correlation_id: None,
            mode: "sync".into(),
            state: ActionState::Accepted,
            input_hash: None,
            deadline_ms: None,
            created_at_ms: 1_700_000_000_000,
            request: json!({"input": {"text": "hello"}, "capability": "cap:demo:echo"}),
        },
        idempotency: Some(IdempotencyClaim {
            scope: "tenant:t1".into(),
            key: format!("k-{id}"),
            input_hash: "0".repeat(64),
            behavior: CollisionBehavior::ReturnOriginalResult,
            expires_at_ms: 1_800_000_000_000,
        }),
        receipts: vec![
            NewReceipt {
                receipt_id: format!("{id}-r0"),
                chain_id: id.clone(),
                tenant: "t1".into(),
                principal: Some("alice".into()),
                action_id: Some(id.clone()),
                receipt_type: "request_received".into(),
                hash: format!("{id}-h0"),
                previous_hash: None,
                created_at_ms: 1_700_000_000_000,
                body: json!({"type": "request_received"}),
            },
            NewReceipt {
                receipt_id: format!("{id}-r1"),
                chain_id: id.clone(),
                tenant: "t1".into(),
                principal: Some("alice".into()),
                action_id: Some(id.clone()),
                receipt_type: "action_accepted".into(),
                hash: format!("{id}-h1"),
                previous_hash: Some(format!("{id}-h0")),
                created_at_ms: 1_700_000_000_000,
                body: json!({"type": "action_accepted"}),
            },
        ],
        events: vec![NewEvent {
            event_id: format!("{id}-e"),
            kind: "aip.action.accepted".into(),
            tenant: "t1".into(),
            principal: Some("alice".into()),
            session_id: None,
            action_id: Some(id.clone()),
            correlation_id: None,
            occurred_at_ms: 1_700_000_000_000,
            data: json!({}),
        }],
        audit: if audited {
            vec![NewAudit {
                audit_id: format!("{id}-aud"),
                tenant: "t1".into(),
                actor: "alice".into(),
                action_label: "action.admitted".into(),
                occurred_at_ms: 1_700_000_000_000,
                data: json!({"capability_id": "cap:demo:echo", "mode": "sync", "decision": "allow"}),
                action_id: Some(id),
                session_id: None,
            }]
        } else {
            Vec::new()
        },
        job: None,
        lease: None,
        approval: None,
        transaction: None,
        timers: Vec::new(),
        callback: None,
        quota: Default::default(),
    }
}

/// Runs `iters` admissions spread over `concurrency` tasks; returns the elapsed time.
async fn admit_many(
    store: Arc<dyn Store>,
    (run, audited): (&'static str, bool),
    iters: u64,
    concurrency: u64,
) -> Duration {
    let start = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..concurrency {
        let store = store.clone();
        let share = iters / concurrency + u64::from(t < iters % concurrency);
        tasks.push(tokio::spawn(async move {
            for _ in 0..share {
                store.admit(admission(run, audited)).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    start.elapsed()
}

/// The baseline: one single-row INSERT transaction per action through the same kind of pool.
async fn baseline_many(store: &Baseline, iters: u64, concurrency: u64) -> Duration {
    let start = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..concurrency {
        let store = store.clone();
        let share = iters / concurrency + u64::from(t < iters % concurrency);
        tasks.push(tokio::spawn(async move {
            for _ in 0..share {
                let n = NEXT.fetch_add(1, Ordering::Relaxed);
                store.insert(n).await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    start.elapsed()
}

#[derive(Clone)]
enum Baseline {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

impl Baseline {
    async fn insert(&self, n: u64) {
        let body =
            sqlx::types::Json(json!({"input": {"text": "hello"}, "capability": "cap:demo:echo"}));
        match self {
            Baseline::Sqlite(p) => {
                let mut tx = p.begin_with("BEGIN IMMEDIATE").await.unwrap();
                sqlx::query("INSERT INTO baseline (id, body) VALUES ($1, $2)")
                    .bind(format!("b{n}"))
                    .bind(body)
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                tx.commit().await.unwrap();
            }
            Baseline::Postgres(p) => {
                let mut tx = p.begin().await.unwrap();
                sqlx::query("INSERT INTO baseline (id, body) VALUES ($1, $2)")
                    .bind(format!("b{n}"))
                    .bind(body)
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                tx.commit().await.unwrap();
            }
        }
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("aip-store-bench-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();

    // SQLite: the store, and the baseline on its own file with the same pragmas.
    let sqlite: Arc<dyn Store> =
        rt.block_on(async { Arc::new(SqliteStore::open(dir.join("store.db")).await.unwrap()) });
    let sqlite_base = rt.block_on(async {
        let opts = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(dir.join("baseline.db"))
            .create_if_missing(true)
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
            .synchronous(sqlx::sqlite::SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(5));
        let pool = sqlx::sqlite::SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(opts)
            .await
            .unwrap();
        sqlx::query("CREATE TABLE baseline (id TEXT PRIMARY KEY, body TEXT NOT NULL)")
            .execute(&pool)
            .await
            .unwrap();
        Baseline::Sqlite(pool)
    });

    let mut group = c.benchmark_group("admission");
    group
        .throughput(Throughput::Elements(1))
        .sample_size(10)
        .measurement_time(Duration::from_secs(8));
    for conc in [1u64, 16] {
        let s = sqlite.clone();
        group.bench_function(format!("sqlite/store_admit/c{conc}"), |b| {
            b.iter_custom(|iters| rt.block_on(admit_many(s.clone(), ("sq", false), iters, conc)))
        });
        group.bench_function(format!("sqlite/store_admit_audited/c{conc}"), |b| {
            b.iter_custom(|iters| rt.block_on(admit_many(s.clone(), ("sqa", true), iters, conc)))
        });
        group.bench_function(format!("sqlite/baseline_insert/c{conc}"), |b| {
            b.iter_custom(|iters| rt.block_on(baseline_many(&sqlite_base, iters, conc)))
        });
    }

    let pg = std::env::var("AIP_TEST_POSTGRES_URL").ok();
    let mut pg_db = None;
    match &pg {
        None => eprintln!(
            "SKIP: AIP_TEST_POSTGRES_URL is not set; PostgreSQL admission benchmark skipped"
        ),
        Some(admin) => {
            let db = format!("aip_store_bench_{}", uuid::Uuid::new_v4().simple());
            let (store, base) = rt.block_on(async {
                let mut conn = sqlx::PgConnection::connect(admin).await.unwrap();
                sqlx::query(AssertSqlSafe(format!("CREATE DATABASE \"{db}\"")))
                    .execute(&mut conn)
                    .await
                    .unwrap();
                let url = match admin.rsplit_once('/') {
                    Some((base, _)) => format!("{base}/{db}"),
                    None => panic!("AIP_TEST_POSTGRES_URL has no database path"),
                };
                let store: Arc<dyn Store> = Arc::new(PostgresStore::connect(&url).await.unwrap());
                let pool = sqlx::postgres::PgPoolOptions::new()
                    .max_connections(16)
                    .connect(&url)
                    .await
                    .unwrap();
                sqlx::query("CREATE TABLE baseline (id TEXT PRIMARY KEY, body JSONB NOT NULL)")
                    .execute(&pool)
                    .await
                    .unwrap();
                (store, Baseline::Postgres(pool))
            });
            pg_db = Some(db);
            for conc in [1u64, 16] {
                let s = store.clone();
                group.bench_function(format!("postgres/store_admit/c{conc}"), |b| {
                    b.iter_custom(|iters| {
                        rt.block_on(admit_many(s.clone(), ("pg", false), iters, conc))
                    })
                });
                group.bench_function(format!("postgres/store_admit_audited/c{conc}"), |b| {
                    b.iter_custom(|iters| {
                        rt.block_on(admit_many(s.clone(), ("pga", true), iters, conc))
                    })
                });
                group.bench_function(format!("postgres/baseline_insert/c{conc}"), |b| {
                    b.iter_custom(|iters| rt.block_on(baseline_many(&base, iters, conc)))
                });
            }
        }
    }
    group.finish();

    if let (Some(admin), Some(db)) = (pg, pg_db) {
        rt.block_on(async {
            let mut conn = sqlx::PgConnection::connect(&admin).await.unwrap();
            sqlx::query(AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS \"{db}\" WITH (FORCE)"
            )))
            .execute(&mut conn)
            .await
            .unwrap();
        });
    }
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, bench);
criterion_main!(benches);
