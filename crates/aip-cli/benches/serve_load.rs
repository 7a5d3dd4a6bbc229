//! Load benchmark of `aip serve`: sync `cap:demo:echo` actions at concurrency 1, 16 and 64,
//! against two baseline axum servers in the same run that parse the same body, store one row per
//! request with the same durability settings (WAL, `synchronous=FULL`) and answer only once it is
//! committed:
//! - the writer baseline, the strongest simple server doing that work: one rusqlite writer thread
//!   fed by a channel does group commit, taking every queued request (up to 256) into one
//!   `BEGIN IMMEDIATE` transaction, one insert each, one `COMMIT` (one fsync) for them all, then
//!   answering each;
//! - the pool baseline: one insert per request through an sqlx pool of 8 connections contending for
//!   SQLite's write lock (one commit, one fsync and several thread hops per request).
//!
//! Both baselines run inside the bench process, on the client's tokio runtime; `aip serve` is its
//! own process. Each row gives aip's actions/s over each baseline's req/s (`aip/writer`, `aip/pool`).
//!
//! Run with `cargo bench -p aip-cli --bench serve_load`; `AIP_BENCH_REQUESTS` overrides the request
//! count per level (default 3000), `AIP_BENCH_LEVELS` the concurrency levels (comma-separated), and
//! `AIP_BENCH_BIN` the `aip` binary served (to compare two builds under the same machine load).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use common::{Figures, WARMUP};

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use serde_json::{Value, json};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

const LEVELS: &str = "1,16,64";

fn main() {
    if !common::benchmarking("serve_load") {
        return;
    }
    let requests = common::requests(3000);
    let levels = common::levels(LEVELS);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("aip-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();

    let server = common::start_node(&dir.join("aip"), None, None);
    let pool_addr = rt.block_on(start_pool_baseline(&dir.join("pool.sqlite")));
    let writer_addr = rt.block_on(start_writer_baseline(&dir.join("writer.sqlite")));
    let client = common::http_client();

    println!("requests per level: {requests} (after {WARMUP} warm-up requests)");
    println!("load average (1 min) before: {}", common::load_average());
    println!(
        "| concurrency | aip actions/s | aip p50 ms | aip p99 ms | writer req/s | writer p50 ms | writer p99 ms | pool req/s | pool p50 ms | pool p99 ms | aip/writer | aip/pool |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let aip_url = format!("http://{}/aip/v1/actions", server.addr);
    let writer_url = format!("http://{writer_addr}/baseline");
    let pool_url = format!("http://{pool_addr}/baseline");
    let token = Some(server.token.as_str());
    for concurrency in levels {
        let aip = rt.block_on(run_level(&client, &aip_url, token, concurrency, requests));
        let writer = rt.block_on(run_level(&client, &writer_url, None, concurrency, requests));
        let pool = rt.block_on(run_level(&client, &pool_url, None, concurrency, requests));
        println!(
            "| {concurrency} | {aip} | {writer} | {pool} | {:.2}x | {:.2}x |",
            aip.rate / writer.rate,
            aip.rate / pool.rate
        );
    }
    println!("load average (1 min) after: {}", common::load_average());
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Sends `WARMUP + requests` envelopes with `concurrency` in flight; every answer must be 2xx.
async fn run_level(
    client: &reqwest::Client,
    url: &str,
    token: Option<&str>,
    concurrency: usize,
    requests: usize,
) -> Figures {
    let (client, url, token) = (client.clone(), url.to_owned(), token.map(str::to_owned));
    common::measure(requests, concurrency, move |n| {
        let (client, url, token) = (client.clone(), url.clone(), token.clone());
        async move { send(&client, &url, token.as_deref(), n).await }
    })
    .await
}

async fn send(client: &reqwest::Client, url: &str, token: Option<&str>, n: usize) {
    // Ids must be unique across levels and warm-ups: the runtime rejects a reused action id.
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let i = SEQ.fetch_add(1, Ordering::Relaxed);
    let body = json!({
        "aip_version": "1.0",
        "message_type": "aip.core.v1.action",
        "message_id": format!("msg_bench_{}_{i}", std::process::id()),
        "sent_at": aip_core::Timestamp::now(),
        "body": { "action": {
            "id": format!("act_bench_{}_{i}", std::process::id()),
            "capability_id": "cap:demo:echo",
            "mode": "sync",
            "input": { "n": n, "text": "hello" }
        } }
    });
    let mut request = client
        .post(url)
        .header("content-type", "application/aip+json")
        .json(&body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    assert!(status.is_success(), "{url}: HTTP {status}: {text}");
}

/// The rows both baselines write, and the insert they run per request.
const CREATE_TABLE: &str =
    "CREATE TABLE IF NOT EXISTS requests (id TEXT PRIMARY KEY, body TEXT NOT NULL)";
const INSERT: &str = "INSERT INTO requests (id, body) VALUES (?, ?)";

/// What a baseline answers: a status and a small JSON body.
type Answer = (StatusCode, axum::Json<Value>);

/// One request's row: the envelope's `message_id` and the parsed body serialized again.
struct Row {
    id: String,
    body: String,
}

impl Row {
    /// Parses the request body as JSON (the work both baselines do before their insert).
    fn parse(body: &[u8]) -> Result<Row, Answer> {
        let Ok(value) = serde_json::from_slice::<Value>(body) else {
            return Err((
                StatusCode::BAD_REQUEST,
                axum::Json(json!({ "error": "bad json" })),
            ));
        };
        let id = value["message_id"].as_str().unwrap_or_default().to_owned();
        let body = serde_json::to_string(&value).unwrap();
        Ok(Row { id, body })
    }
}

/// The answer to a request whose row was stored under `id` (`None`: the insert failed).
fn stored(id: Option<String>) -> Answer {
    match id {
        Some(id) => (
            StatusCode::OK,
            axum::Json(json!({ "id": id, "status": "stored" })),
        ),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(json!({ "error": "insert failed" })),
        ),
    }
}

/// Serves `handler` with `state` at `POST /baseline` on a free local port.
async fn serve<S: Clone + Send + Sync + 'static>(
    handler: axum::routing::MethodRouter<S>,
    state: S,
) -> SocketAddr {
    let app = axum::Router::new()
        .route("/baseline", handler)
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// The pool baseline: parse the body, insert one row through an sqlx pool of 8 connections (each
/// insert its own transaction, the connections contending for SQLite's write lock), answer JSON.
/// Same SQLite durability as the store.
async fn start_pool_baseline(path: &std::path::Path) -> SocketAddr {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .busy_timeout(Duration::from_secs(5));
    let pool = SqlitePoolOptions::new()
        .max_connections(8)
        .connect_with(options)
        .await
        .unwrap();
    sqlx::query(CREATE_TABLE).execute(&pool).await.unwrap();
    serve(post(pool_insert), pool).await
}

async fn pool_insert(State(pool): State<sqlx::SqlitePool>, body: axum::body::Bytes) -> Answer {
    let row = match Row::parse(&body) {
        Ok(row) => row,
        Err(answer) => return answer,
    };
    let inserted = sqlx::query(INSERT)
        .bind(&row.id)
        .bind(row.body)
        .execute(&pool)
        .await;
    stored(inserted.is_ok().then_some(row.id))
}

/// The most requests the writer baseline takes into one transaction (as aip's store writer).
const MAX_BATCH: usize = 256;

/// A request queued for the writer baseline's thread; it answers `Some(id)` once the row is
/// committed, `None` (or drops `reply`) if it is not.
struct WriteJob {
    row: Row,
    reply: tokio::sync::oneshot::Sender<Option<String>>,
}

/// The writer baseline: parse the body, queue the row for one rusqlite writer thread doing group
/// commit, answer JSON once its transaction has committed. Same SQLite durability as the store.
async fn start_writer_baseline(path: &std::path::Path) -> SocketAddr {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
        .unwrap();
    assert!(mode.eq_ignore_ascii_case("wal"), "journal mode {mode}");
    conn.pragma_update(None, "synchronous", "FULL").unwrap();
    conn.busy_timeout(Duration::from_secs(5)).unwrap();
    conn.execute(CREATE_TABLE, ()).unwrap();
    let (jobs, queue) = tokio::sync::mpsc::channel(4 * MAX_BATCH);
    std::thread::Builder::new()
        .name("baseline-writer".into())
        .spawn(move || write_loop(&conn, queue))
        .unwrap();
    serve(post(writer_insert), jobs).await
}

async fn writer_insert(
    State(jobs): State<tokio::sync::mpsc::Sender<WriteJob>>,
    body: axum::body::Bytes,
) -> Answer {
    let row = match Row::parse(&body) {
        Ok(row) => row,
        Err(answer) => return answer,
    };
    let (reply, committed) = tokio::sync::oneshot::channel();
    if jobs.send(WriteJob { row, reply }).await.is_err() {
        return stored(None);
    }
    stored(committed.await.ok().flatten())
}

/// The writer thread: takes every queued request (up to [`MAX_BATCH`]) into one transaction and
/// answers each after its commit.
fn write_loop(conn: &rusqlite::Connection, mut queue: tokio::sync::mpsc::Receiver<WriteJob>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let mut inserted = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = queue.blocking_recv() {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            let Ok(job) = queue.try_recv() else { break };
            batch.push(job);
        }
        let committed = commit(conn, &batch, &mut inserted);
        for (job, ok) in batch.drain(..).zip(inserted.drain(..)) {
            let _ = job.reply.send((committed && ok).then_some(job.row.id));
        }
    }
}

/// Inserts `batch` in one `BEGIN IMMEDIATE` transaction, pushing whether each insert succeeded
/// onto `inserted`, and commits; true if the commit (one fsync) succeeded. An insert that fails
/// (a duplicate id) is undone alone: SQLite's default `ABORT` keeps the transaction open.
fn commit(conn: &rusqlite::Connection, batch: &[WriteJob], inserted: &mut Vec<bool>) -> bool {
    let step = |sql: &str| conn.prepare_cached(sql).and_then(|mut s| s.execute(()));
    if step("BEGIN IMMEDIATE").is_err() {
        return false;
    }
    if let Ok(mut insert) = conn.prepare_cached(INSERT) {
        for job in batch {
            inserted.push(insert.execute((&job.row.id, &job.row.body)).is_ok());
        }
    }
    // An I/O or memory error can roll the whole transaction back: then nothing was stored.
    if !conn.is_autocommit() && step("COMMIT").is_ok() {
        return true;
    }
    if !conn.is_autocommit() {
        let _ = step("ROLLBACK");
    }
    false
}
