//! Store factories for the shared suite: SQLite on a temporary file, PostgreSQL on a uniquely named
//! database created from `AIP_TEST_POSTGRES_URL` and dropped afterwards.

use std::path::PathBuf;
use std::sync::Arc;

use aip_store::{PostgresStore, SqliteStore, Store, StoreResult};
use sqlx::{AssertSqlSafe, Connection as _, Row as _};

/// Where a test's storage lives.
enum Location {
    Sqlite {
        dir: PathBuf,
    },
    Postgres {
        admin_url: String,
        url: String,
        db: String,
    },
}

/// One test's store and the means to reopen it (a "restart") or inspect it raw.
pub struct Harness {
    pub store: Arc<dyn Store>,
    location: Location,
}

impl Harness {
    pub async fn sqlite() -> Harness {
        Self::sqlite_from(None).await
    }

    /// [`Harness::sqlite`] on a database file that `prepare` (raw SQL, several statements) has set
    /// up before the store first opens it: an older schema to upgrade, say.
    pub async fn sqlite_from(prepare: Option<&str>) -> Harness {
        let dir = std::env::temp_dir().join(format!("aip-store-test-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        if let Some(prepare) = prepare {
            let options = sqlx::sqlite::SqliteConnectOptions::new()
                .filename(dir.join("aip.db"))
                .create_if_missing(true);
            let mut c = sqlx::SqliteConnection::connect_with(&options)
                .await
                .unwrap();
            sqlx::raw_sql(AssertSqlSafe(prepare.to_owned()))
                .execute(&mut c)
                .await
                .unwrap();
            c.close().await.unwrap();
        }
        let location = Location::Sqlite { dir };
        let store = open(&location).await.unwrap();
        Harness { store, location }
    }

    /// `None` (after printing a SKIP notice) when `AIP_TEST_POSTGRES_URL` is unset or PostgreSQL
    /// does not answer there; under `CI=true` either fails the test ([`skip_or_fail`]).
    pub async fn postgres() -> Option<Harness> {
        Self::postgres_from(None).await
    }

    /// [`Harness::postgres`] on a database that `prepare` (raw SQL, several statements) has set up
    /// before the store first opens it: an older schema to upgrade, say.
    pub async fn postgres_from(prepare: Option<&str>) -> Option<Harness> {
        let Ok(admin_url) = std::env::var("AIP_TEST_POSTGRES_URL") else {
            skip_or_fail("AIP_TEST_POSTGRES_URL is not set");
            return None;
        };
        let db = format!("aip_store_test_{}", uuid::Uuid::new_v4().simple());
        let mut admin = match sqlx::PgConnection::connect(&admin_url).await {
            Ok(admin) => admin,
            Err(e) => {
                skip_or_fail(&format!(
                    "PostgreSQL at AIP_TEST_POSTGRES_URL does not answer ({e})"
                ));
                return None;
            }
        };
        sqlx::query(AssertSqlSafe(format!("CREATE DATABASE \"{db}\"")))
            .execute(&mut admin)
            .await
            .unwrap();
        admin.close().await.unwrap();
        let url = with_database(&admin_url, &db);
        if let Some(prepare) = prepare {
            let mut c = sqlx::PgConnection::connect(&url).await.unwrap();
            sqlx::raw_sql(AssertSqlSafe(prepare.to_owned()))
                .execute(&mut c)
                .await
                .unwrap();
            c.close().await.unwrap();
        }
        let location = Location::Postgres { admin_url, url, db };
        let store = open(&location).await.unwrap();
        Some(Harness { store, location })
    }

    /// A second store instance on the same storage: a restarted process, or another node.
    pub async fn reopen(&self) -> StoreResult<Arc<dyn Store>> {
        open(&self.location).await
    }

    /// Runs raw SQL against the storage, returning rows affected or the error text.
    pub async fn raw_exec(&self, sql: &str) -> Result<u64, String> {
        let sql = AssertSqlSafe(sql.to_owned());
        match &self.location {
            Location::Sqlite { dir } => {
                let mut c = sqlite_connection(dir).await;
                sqlx::query(sql)
                    .execute(&mut c)
                    .await
                    .map(|r| r.rows_affected())
                    .map_err(|e| e.to_string())
            }
            Location::Postgres { url, .. } => {
                let mut c = sqlx::PgConnection::connect(url).await.unwrap();
                sqlx::query(sql)
                    .execute(&mut c)
                    .await
                    .map(|r| r.rows_affected())
                    .map_err(|e| e.to_string())
            }
        }
    }

    /// A raw connection to the PostgreSQL test database (`None` on SQLite).
    pub async fn raw_pg_connection(&self) -> Option<sqlx::PgConnection> {
        match &self.location {
            Location::Postgres { url, .. } => Some(sqlx::PgConnection::connect(url).await.unwrap()),
            Location::Sqlite { .. } => None,
        }
    }

    /// The backend's plan of raw `sql` as text (SQLite's `EXPLAIN QUERY PLAN` details, PostgreSQL's
    /// `EXPLAIN` lines).
    pub async fn raw_plan(&self, sql: &str) -> String {
        match &self.location {
            Location::Sqlite { dir } => {
                let mut c = sqlite_connection(dir).await;
                sqlx::query(AssertSqlSafe(format!("EXPLAIN QUERY PLAN {sql}")))
                    .fetch_all(&mut c)
                    .await
                    .unwrap()
                    .iter()
                    .map(|r| r.get::<String, _>("detail"))
                    .collect::<Vec<_>>()
                    .join("\n")
            }
            Location::Postgres { .. } => {
                self.raw_strings(&format!("EXPLAIN {sql}")).await.join("\n")
            }
        }
    }

    /// Runs a raw query returning one text column.
    pub async fn raw_strings(&self, sql: &str) -> Vec<String> {
        let sql = AssertSqlSafe(sql.to_owned());
        match &self.location {
            Location::Sqlite { dir } => {
                let mut c = sqlite_connection(dir).await;
                sqlx::query(sql)
                    .fetch_all(&mut c)
                    .await
                    .unwrap()
                    .iter()
                    .map(|r| r.get::<String, _>(0))
                    .collect()
            }
            Location::Postgres { url, .. } => {
                let mut c = sqlx::PgConnection::connect(url).await.unwrap();
                sqlx::query(sql)
                    .fetch_all(&mut c)
                    .await
                    .unwrap()
                    .iter()
                    .map(|r| r.get::<String, _>(0))
                    .collect()
            }
        }
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        match &self.location {
            Location::Sqlite { dir } => {
                let _ = std::fs::remove_dir_all(dir);
            }
            Location::Postgres { admin_url, db, .. } => {
                let (admin_url, db) = (admin_url.clone(), db.clone());
                // Dropping happens inside the test's runtime; use a thread with its own runtime.
                let done = std::thread::spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap();
                    rt.block_on(async {
                        if let Ok(mut admin) = sqlx::PgConnection::connect(&admin_url).await {
                            let sql = AssertSqlSafe(format!(
                                "DROP DATABASE IF EXISTS \"{db}\" WITH (FORCE)"
                            ));
                            if let Err(e) = sqlx::query(sql).execute(&mut admin).await {
                                eprintln!("could not drop test database {db}: {e}");
                            }
                        }
                    });
                });
                let _ = done.join();
            }
        }
    }
}

/// PostgreSQL is missing for the store suite, `why`: a SKIP notice, or under `CI=true` a failure,
/// so a green CI run never hides a skipped PostgreSQL half.
fn skip_or_fail(why: &str) {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "{why}; CI=true, so the PostgreSQL half of the store suite fails instead of skipping \
             (.ci/run sets AIP_TEST_POSTGRES_URL once port 5432 is open)"
        );
    }
    eprintln!("SKIP: {why}; PostgreSQL half of the store suite skipped");
}

async fn open(location: &Location) -> StoreResult<Arc<dyn Store>> {
    match location {
        Location::Sqlite { dir } => Ok(Arc::new(SqliteStore::open(dir.join("aip.db")).await?)),
        Location::Postgres { url, .. } => Ok(Arc::new(PostgresStore::connect(url).await?)),
    }
}

/// A raw connection to the SQLite test store in `dir`.
async fn sqlite_connection(dir: &std::path::Path) -> sqlx::SqliteConnection {
    sqlx::SqliteConnection::connect(&format!("sqlite://{}", dir.join("aip.db").display()))
        .await
        .unwrap()
}

/// Replaces the database name of a `postgres://` URL.
fn with_database(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let scheme_end = base.find("://").map(|i| i + 3).unwrap_or(0);
    let host_end = base[scheme_end..]
        .find('/')
        .map(|i| scheme_end + i)
        .unwrap_or(base.len());
    let mut out = format!("{}/{}", &base[..host_end], db);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}
