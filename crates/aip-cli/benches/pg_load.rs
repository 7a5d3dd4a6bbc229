//! PostgreSQL load benchmark: sync `cap:demo:echo` actions over HTTP at concurrency 16 on
//! `aip serve --database postgres://…`, against pgbench running the same statements per action
//! (`pg_load.sql`: captured from the store with `log_statement = 'all'`) with 16 clients on the same
//! server and database, in the same run. Needs `AIP_TEST_POSTGRES_URL` and `pgbench` (SKIP otherwise);
//! creates and drops its own database. `cargo bench -p aip-cli --bench pg_load`;
//! `AIP_BENCH_REQUESTS` (default 3000) and `AIP_BENCH_PGBENCH_SECS` (default 20) set the sizes.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../tests/cluster/mod.rs"]
mod cluster;
mod common;
#[path = "../tests/support/mod.rs"]
mod support;

use std::process::Command;

const CONCURRENCY: usize = 16;

fn main() {
    if !common::benchmarking("pg_load") {
        return;
    }
    if Command::new("pgbench").arg("--version").output().is_err() {
        println!("SKIP: pgbench is not on PATH");
        return;
    }
    let requests = common::requests(3000);
    let seconds: u64 = std::env::var("AIP_BENCH_PGBENCH_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    // A database of its own, dropped at the end (SKIP notice when AIP_TEST_POSTGRES_URL is unset).
    let Some(db) = rt.block_on(cluster::TestDb::create("pg_load")) else {
        return;
    };
    let db_url = db.url.clone();
    let dir = std::env::temp_dir().join(format!("aip-pg-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();

    let load_before = common::load_average();
    let node = common::start_node(&dir, None, Some(&db_url));
    let http = common::http_client();
    let url = format!("http://{}/aip/v1/actions", node.addr);
    let token = node.token.clone();
    let aip_rate = rt.block_on(common::run(requests, CONCURRENCY, move |i| {
        let (http, url, token) = (http.clone(), url.clone(), token.clone());
        async move { common::post_action(&http, &url, &token, i).await }
    }));
    // The node's idle workers stop before the baseline runs on the same tables.
    drop(node);

    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/pg_load.sql");
    let output = Command::new("pgbench")
        .args(["-n", "-M", "prepared", "-D", "cap=cap:demo:echo", "-j", "2"])
        .args(["-c", &CONCURRENCY.to_string(), "-T", &seconds.to_string()])
        .args(["-f", script])
        .arg(&db_url)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    let pg_rate: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("tps = "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "pgbench failed: {text}{}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
    let failed = text
        .lines()
        .find(|l| l.starts_with("number of failed transactions"))
        .unwrap_or("")
        .to_owned();
    let load_after = common::load_average();

    drop(db);
    let _ = std::fs::remove_dir_all(&dir);

    println!(
        "PostgreSQL, sync echo actions, concurrency {CONCURRENCY}; aip: {requests} actions after {} warm-up; \
         pgbench: {seconds} s, one script run = one action's statements ({failed}); load average {load_before} -> {load_after}",
        common::WARMUP
    );
    println!("| system | actions/s |\n|---|---:|");
    println!("| aip serve --database postgres (HTTP) | {aip_rate:.0} |");
    println!("| pgbench, same statements per action | {pg_rate:.0} |");
    println!(
        "aip / pgbench = {:.2}x (target >= 0.5x)",
        aip_rate / pg_rate
    );
}
