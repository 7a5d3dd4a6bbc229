//! The PostgreSQL event sequencer: gives committed events their listing positions after commit,
//! one run at a time across nodes, and the `LISTEN` task that wakes this node's readers.

use std::time::Duration;

use sqlx::postgres::{PgListener, PgPool};

use crate::error::StoreResult;

/// Coalesces this node's sequencer runs. Every committed write with events needs one run that
/// starts after its commit; instead of each writer queueing on the cross-node advisory lock (one
/// transaction per writer, serialized), writers wait for the next in-process run, which covers every
/// write registered before it started.
#[derive(Debug, Default)]
pub(super) struct Sequencer {
    /// Writes registered so far (each after its commit).
    requested: std::sync::atomic::AtomicU64,
    /// Every write up to this count is covered by a finished run.
    covered: std::sync::atomic::AtomicU64,
    /// One run at a time in this process.
    running: tokio::sync::Mutex<()>,
}

impl Sequencer {
    /// Returns once a sequencer run that started after this call has finished (or failed: the
    /// listener's periodic sweep then sequences the events, as before).
    pub(super) async fn run_after_commit(&self, pool: &PgPool) {
        use std::sync::atomic::Ordering::SeqCst;
        let ticket = self.requested.fetch_add(1, SeqCst) + 1;
        if self.covered.load(SeqCst) >= ticket {
            return;
        }
        let _running = self.running.lock().await;
        if self.covered.load(SeqCst) >= ticket {
            return;
        }
        // Every write counted here committed before registering, so this run sees its events.
        let covers = self.requested.load(SeqCst);
        if sequence_events(pool).await.is_ok() {
            self.covered.fetch_max(covers, SeqCst);
        }
    }
}

/// Forwards notifications into the watch and sweeps unpositioned events once a second (a node that
/// died between commit and sequencing leaves some). `try_recv` reconnects by itself; after a
/// reconnect (or any error) waiters are woken too, because notifications sent meanwhile were lost.
pub(super) async fn listen(
    mut listener: PgListener,
    pool: PgPool,
    changes: tokio::sync::watch::Sender<u64>,
) {
    loop {
        match tokio::time::timeout(Duration::from_secs(1), listener.try_recv()).await {
            Ok(Ok(_)) => {}
            Ok(Err(_)) => tokio::time::sleep(Duration::from_millis(200)).await,
            Err(_) => {
                if let Ok(0) = sequence_events(&pool).await {
                    continue;
                }
            }
        }
        changes.send_modify(|v| *v = v.wrapping_add(1));
    }
}

/// The advisory-lock key of the event sequencer ("aipseqr" in ASCII).
const SEQUENCER_LOCK: i64 = 0x0061_6970_7365_7172;
/// How many events one sequencer transaction positions.
const SEQUENCER_BATCH: u64 = 10_000;

/// Gives committed, unpositioned events their listing position. Runs one at a time across all nodes
/// (advisory lock held to commit), so every run's positions are greater than every earlier run's and
/// become visible atomically: a reader's cursor can never be overtaken by a late commit.
async fn sequence_events(pool: &PgPool) -> StoreResult<u64> {
    let mut total = 0;
    loop {
        let mut tx = pool.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(SEQUENCER_LOCK)
            .execute(&mut *tx)
            .await?;
        // Events, then audit events: each table's own positions, under the one lock.
        let mut n = 0;
        for table in ["aip_events", "aip_audit"] {
            n = n.max(
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "WITH pending AS (SELECT seq, row_number() OVER (ORDER BY seq) AS rn FROM {table} \
                     WHERE pos IS NULL ORDER BY seq LIMIT 10000), \
                     base AS (SELECT COALESCE(MAX(pos), 0) AS b FROM {table}) \
                     UPDATE {table} e SET pos = base.b + pending.rn FROM pending, base WHERE e.seq = pending.seq"
                )))
                .execute(&mut *tx)
                .await?
                .rows_affected(),
            );
        }
        if n > 0 {
            sqlx::query("SELECT pg_notify('aip_changes', '')")
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        total += n;
        if n < SEQUENCER_BATCH {
            return Ok(total);
        }
    }
}
