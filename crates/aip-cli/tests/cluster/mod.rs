//! Shared PostgreSQL databases and `aip serve` nodes on them: a uniquely named database per
//! test, created from `AIP_TEST_POSTGRES_URL` and dropped afterwards.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Stdio};

use sqlx::{AssertSqlSafe, Connection as _};

use crate::support::{Server, id, skip_or_fail};

/// A database of its own for one test; dropped (forcibly) on `drop`.
pub struct TestDb {
    admin_url: String,
    /// Database name.
    pub name: String,
    /// URL of the test database.
    pub url: String,
}

impl TestDb {
    /// `None` (after printing a SKIP notice) when `AIP_TEST_POSTGRES_URL` is unset or PostgreSQL
    /// does not answer there; under `CI=true` either fails the test ([`skip_or_fail`]).
    pub async fn create(test: &str) -> Option<TestDb> {
        let Ok(admin_url) = std::env::var("AIP_TEST_POSTGRES_URL") else {
            skip_or_fail(&format!(
                "AIP_TEST_POSTGRES_URL is not set; {test} needs PostgreSQL"
            ));
            return None;
        };
        // No `aip_` in the name: the support module refuses stdout lines that look like tokens.
        let name = id("scale_").to_ascii_lowercase();
        let mut admin = match sqlx::PgConnection::connect(&admin_url).await {
            Ok(admin) => admin,
            Err(e) => {
                skip_or_fail(&format!(
                    "PostgreSQL at AIP_TEST_POSTGRES_URL does not answer ({e}); {test} needs it"
                ));
                return None;
            }
        };
        sqlx::query(AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
            .execute(&mut admin)
            .await
            .unwrap();
        admin.close().await.unwrap();
        let url = with_database(&admin_url, &name);
        Some(TestDb {
            admin_url,
            name,
            url,
        })
    }

    /// Runs one statement on the test database; returns rows affected.
    pub async fn exec(&self, sql: &str) -> u64 {
        let mut c = sqlx::PgConnection::connect(&self.url).await.unwrap();
        let n = sqlx::query(AssertSqlSafe(sql.to_owned()))
            .execute(&mut c)
            .await
            .unwrap()
            .rows_affected();
        c.close().await.unwrap();
        n
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let admin_url = self.admin_url.clone();
        let sql = format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name);
        // Drop runs inside the test's runtime: use a thread with a runtime of its own.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                if let Ok(mut c) = sqlx::PgConnection::connect(&admin_url).await {
                    let _ = sqlx::query(AssertSqlSafe(sql)).execute(&mut c).await;
                    let _ = c.close().await;
                }
            });
        })
        .join();
    }
}

/// `admin_url` with its database path replaced by `db`.
fn with_database(admin_url: &str, db: &str) -> String {
    let (base, query) = match admin_url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (admin_url, None),
    };
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let host_end = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    let mut url = format!("{}/{db}", &base[..host_end]);
    if let Some(q) = query {
        url.push('?');
        url.push_str(q);
    }
    url
}

/// Starts one `aip serve` node on `database` with its own data directory; its stderr goes to
/// `stderr` when given (to read its log afterwards), else to the test's stderr.
pub fn start_node(
    data_dir: &Path,
    database: &str,
    env: &[(&str, &str)],
    stderr: Option<&Path>,
) -> Server {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_aip"));
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        .args(["--database", database]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let err = match stderr {
        Some(path) => Stdio::from(std::fs::File::create(path).unwrap()),
        None => Stdio::inherit(),
    };
    let child = cmd
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(err)
        .spawn()
        .unwrap();
    Server::from_child(child, data_dir)
}

/// Sends `signal` (e.g. "STOP", "CONT") to a node.
pub fn signal(server: &Server, signal: &str) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(server.child.id().to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} failed");
}
