//! How the store's statements run, the same way on every kind of connection.
//!
//! The store's SQL is written once (`sql/`) against [`Stmt`] and [`Row`]. Writes run as
//! closures over a [`Tx`]: on PostgreSQL a sqlx transaction; on SQLite the rusqlite connection the
//! writer thread owns, where a statement is a plain function call. Through sqlx every SQLite
//! statement was a round trip between a tokio worker and sqlx's connection thread (two thread
//! wake-ups each, ~36 per sync action), which bounded write throughput; now a whole group commit
//! runs on one thread and a write costs one hand-off each way. Reads stay on sqlx pools.
//!
//! Parameters keep the Rust types the statements were written for (text, 64-bit integers, JSON,
//! and typed NULLs), so PostgreSQL sees exactly the parameter types it saw before.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;

use crate::error::{StoreError, StoreResult};

/// A boxed, sendable future borrowing for `'a` (the shape of a write closure's result).
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One bound statement parameter.
#[derive(Debug)]
pub(crate) enum Param<'q> {
    Int(i64),
    Text(&'q str),
    OwnedText(String),
    Json(&'q Value),
    NullInt,
    NullText,
    NullJson,
}

/// A JSON parameter (stored as JSONB on PostgreSQL, as text on SQLite).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Json<'q>(pub &'q Value);

/// Values a statement can bind; `NULL` keeps the value's type.
pub(crate) trait IntoParam<'q> {
    /// The parameter.
    fn into_param(self) -> Param<'q>;
    /// A NULL of this type.
    fn null() -> Param<'q>;
}

impl<'q> IntoParam<'q> for i64 {
    fn into_param(self) -> Param<'q> {
        Param::Int(self)
    }
    fn null() -> Param<'q> {
        Param::NullInt
    }
}

impl<'q> IntoParam<'q> for &'q str {
    fn into_param(self) -> Param<'q> {
        Param::Text(self)
    }
    fn null() -> Param<'q> {
        Param::NullText
    }
}

impl<'q> IntoParam<'q> for &'q String {
    fn into_param(self) -> Param<'q> {
        Param::Text(self)
    }
    fn null() -> Param<'q> {
        Param::NullText
    }
}

impl<'q> IntoParam<'q> for String {
    fn into_param(self) -> Param<'q> {
        Param::OwnedText(self)
    }
    fn null() -> Param<'q> {
        Param::NullText
    }
}

impl<'q> IntoParam<'q> for Json<'q> {
    fn into_param(self) -> Param<'q> {
        Param::Json(self.0)
    }
    fn null() -> Param<'q> {
        Param::NullJson
    }
}

impl<'q, T: IntoParam<'q>> IntoParam<'q> for Option<T> {
    fn into_param(self) -> Param<'q> {
        match self {
            Some(v) => v.into_param(),
            None => T::null(),
        }
    }
    fn null() -> Param<'q> {
        T::null()
    }
}

/// What a statement is run for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Want {
    /// Its result rows.
    Rows,
    /// The number of rows it changed.
    Affected,
}

/// What a statement gave back.
pub(crate) enum Output {
    Rows(Vec<Row>),
    Affected(u64),
}

/// A statement with its parameters (`$1`, `$2`, … in the SQL, numbered from one).
#[derive(Debug)]
pub(crate) struct Stmt<'q> {
    sql: Cow<'static, str>,
    params: Vec<Param<'q>>,
}

/// Starts a statement. The SQL holds placeholders only, never values.
pub(crate) fn query<'q>(sql: impl Into<Cow<'static, str>>) -> Stmt<'q> {
    Stmt {
        sql: sql.into(),
        params: Vec::new(),
    }
}

impl<'q> Stmt<'q> {
    /// Binds the next parameter.
    pub(crate) fn bind(mut self, value: impl IntoParam<'q>) -> Self {
        self.params.push(value.into_param());
        self
    }

    /// Runs the statement; returns the number of rows it changed.
    pub(crate) async fn execute<E: Exec<'q>>(self, on: E) -> DbResult<u64> {
        match on.run(self, Want::Affected).await? {
            Output::Affected(n) => Ok(n),
            Output::Rows(rows) => Ok(rows.len() as u64),
        }
    }

    /// Runs the statement; returns all its rows.
    pub(crate) async fn fetch_all<E: Exec<'q>>(self, on: E) -> DbResult<Vec<Row>> {
        match on.run(self, Want::Rows).await? {
            Output::Rows(rows) => Ok(rows),
            Output::Affected(_) => Ok(Vec::new()),
        }
    }

    /// Runs the statement; returns its first row, if any.
    pub(crate) async fn fetch_optional<E: Exec<'q>>(self, on: E) -> DbResult<Option<Row>> {
        Ok(self.fetch_all(on).await?.into_iter().next())
    }

    /// Runs the statement; returns its first row, which must exist.
    pub(crate) async fn fetch_one<E: Exec<'q>>(self, on: E) -> DbResult<Row> {
        self.fetch_optional(on).await?.ok_or(DbError::NoRow)
    }

    /// The statement as a sqlx query, binding each parameter as the Rust type it was given as.
    fn into_sqlx<DB>(self) -> sqlx::query::Query<'q, DB, <DB as sqlx::Database>::Arguments>
    where
        DB: sqlx::Database,
        for<'a> &'a str: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
        for<'a> String: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
        for<'a> i64: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
        for<'a> Option<i64>: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
        for<'a> Option<&'a str>: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
        for<'a> sqlx::types::Json<&'a Value>: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
        for<'a> Option<sqlx::types::Json<&'a Value>>: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    {
        let mut q = match self.sql {
            Cow::Borrowed(sql) => sqlx::query(sql),
            Cow::Owned(sql) => sqlx::query(sqlx::AssertSqlSafe(sql)),
        };
        for p in self.params {
            q = match p {
                Param::Int(v) => q.bind(v),
                Param::Text(v) => q.bind(v),
                Param::OwnedText(v) => q.bind(v),
                Param::Json(v) => q.bind(sqlx::types::Json(v)),
                Param::NullInt => q.bind(None::<i64>),
                Param::NullText => q.bind(None::<&str>),
                Param::NullJson => q.bind(None::<sqlx::types::Json<&Value>>),
            };
        }
        q
    }
}

/// A connection inside a write's transaction.
pub(crate) trait Tx: Send {
    /// Runs one statement.
    fn run<'a>(&'a mut self, stmt: Stmt<'a>, want: Want) -> BoxFuture<'a, DbResult<Output>>;
    /// Runs a script of several statements without parameters (migrations).
    fn batch<'a>(&'a mut self, sql: &'static str) -> BoxFuture<'a, DbResult<()>>;
}

/// A read pool: runs each statement on a pooled connection, outside any write.
pub(crate) trait Pool: Send + Sync {
    /// Runs one statement.
    fn run<'a>(&'a self, stmt: Stmt<'a>, want: Want) -> BoxFuture<'a, DbResult<Output>>;
}

/// Something a statement can run on: a write's [`Tx`] or a read [`Pool`].
pub(crate) trait Exec<'a> {
    /// Runs `stmt`.
    fn run(self, stmt: Stmt<'a>, want: Want) -> BoxFuture<'a, DbResult<Output>>;
}

impl<'a, 'c: 'a> Exec<'a> for &'a mut (dyn Tx + 'c) {
    fn run(self, stmt: Stmt<'a>, want: Want) -> BoxFuture<'a, DbResult<Output>> {
        Tx::run(self, stmt, want)
    }
}

impl<'a, P: Pool> Exec<'a> for &'a P {
    fn run(self, stmt: Stmt<'a>, want: Want) -> BoxFuture<'a, DbResult<Output>> {
        Pool::run(self, stmt, want)
    }
}

/// Runs a sqlx query for rows or a change count (one body for both sqlx backends).
macro_rules! run_sqlx {
    ($stmt:expr, $want:expr, $on:expr, $db:ty, $wrap:expr) => {{
        let q = $stmt.into_sqlx::<$db>();
        match $want {
            Want::Rows => Ok(Output::Rows(
                q.fetch_all($on).await?.into_iter().map($wrap).collect(),
            )),
            Want::Affected => Ok(Output::Affected(q.execute($on).await?.rows_affected())),
        }
    }};
}

impl Pool for sqlx::SqlitePool {
    fn run<'a>(&'a self, stmt: Stmt<'a>, want: Want) -> BoxFuture<'a, DbResult<Output>> {
        Box::pin(async move { run_sqlx!(stmt, want, self, sqlx::Sqlite, Row::Sqlite) })
    }
}

impl Pool for sqlx::PgPool {
    fn run<'a>(&'a self, stmt: Stmt<'a>, want: Want) -> BoxFuture<'a, DbResult<Output>> {
        Box::pin(async move { run_sqlx!(stmt, want, self, sqlx::Postgres, Row::Pg) })
    }
}

impl Tx for sqlx::PgConnection {
    fn run<'a>(&'a mut self, stmt: Stmt<'a>, want: Want) -> BoxFuture<'a, DbResult<Output>> {
        Box::pin(async move { run_sqlx!(stmt, want, &mut *self, sqlx::Postgres, Row::Pg) })
    }

    fn batch<'a>(&'a mut self, sql: &'static str) -> BoxFuture<'a, DbResult<()>> {
        Box::pin(async move {
            sqlx::raw_sql(sql).execute(&mut *self).await?;
            Ok(())
        })
    }
}

/// The SQLite writer thread's connection as a [`Tx`]. Every future it returns is already complete
/// (rusqlite is synchronous), so the writer polls a write's future once, with no waker.
pub(crate) struct SqliteTx<'c>(pub(crate) &'c mut rusqlite::Connection);

impl Tx for SqliteTx<'_> {
    fn run<'a>(&'a mut self, stmt: Stmt<'a>, want: Want) -> BoxFuture<'a, DbResult<Output>> {
        Box::pin(std::future::ready(sqlite_run(self.0, stmt, want)))
    }

    fn batch<'a>(&'a mut self, sql: &'static str) -> BoxFuture<'a, DbResult<()>> {
        Box::pin(std::future::ready(
            self.0.execute_batch(sql).map_err(DbError::Sqlite),
        ))
    }
}

/// Runs one statement on rusqlite: `$N` placeholders are bound by their number, as sqlx does.
fn sqlite_run(conn: &rusqlite::Connection, stmt: Stmt<'_>, want: Want) -> DbResult<Output> {
    let mut s = conn.prepare_cached(&stmt.sql)?;
    for index in 1..=s.parameter_count() {
        let number = s
            .parameter_name(index)
            .and_then(|name| name.strip_prefix('$'))
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(|| DbError::Bind(format!("parameter {index} is not named $N")))?;
        let param = number
            .checked_sub(1)
            .and_then(|i| stmt.params.get(i))
            .ok_or_else(|| DbError::Bind(format!("${number} has no bound value")))?;
        match param {
            Param::Int(v) => s.raw_bind_parameter(index, v)?,
            Param::Text(v) => s.raw_bind_parameter(index, v)?,
            Param::OwnedText(v) => s.raw_bind_parameter(index, v)?,
            Param::Json(v) => s.raw_bind_parameter(index, v.to_string())?,
            Param::NullInt | Param::NullText | Param::NullJson => {
                s.raw_bind_parameter(index, rusqlite::types::Null)?
            }
        }
    }
    if want == Want::Affected && s.column_count() == 0 {
        return Ok(Output::Affected(s.raw_execute()? as u64));
    }
    // Column names are copied only for a statement that returns rows (most writes return none).
    let mut names: Option<Arc<[String]>> = None;
    let mut found = Vec::new();
    let mut rows = s.raw_query();
    while let Some(r) = rows.next()? {
        let names = names
            .get_or_insert_with(|| {
                let stmt: &rusqlite::Statement<'_> = r.as_ref();
                stmt.column_names().into_iter().map(str::to_owned).collect()
            })
            .clone();
        let mut values = Vec::with_capacity(names.len());
        for i in 0..names.len() {
            values.push(match r.get_ref(i)? {
                rusqlite::types::ValueRef::Null => Val::Null,
                rusqlite::types::ValueRef::Integer(v) => Val::Int(v),
                rusqlite::types::ValueRef::Real(_) => Val::Real,
                rusqlite::types::ValueRef::Text(t) => Val::Text(
                    String::from_utf8(t.to_vec())
                        .map_err(|_| DbError::Decode(format!("{} is not UTF-8", names[i])))?,
                ),
                rusqlite::types::ValueRef::Blob(b) => Val::Blob(b.to_vec()),
            });
        }
        found.push(Row::Owned(OwnedRow { names, values }));
    }
    Ok(match want {
        Want::Rows => Output::Rows(found),
        Want::Affected => Output::Affected(conn.changes()),
    })
}

/// A column value read on the SQLite writer.
#[derive(Debug, Clone)]
pub(crate) enum Val {
    Null,
    Int(i64),
    /// The store never stores reals; one read back is reported as corrupt.
    Real,
    Text(String),
    Blob(Vec<u8>),
}

/// A row read on the SQLite writer.
#[derive(Debug)]
pub(crate) struct OwnedRow {
    names: Arc<[String]>,
    values: Vec<Val>,
}

/// A result row from any connection.
pub(crate) enum Row {
    Sqlite(sqlx::sqlite::SqliteRow),
    Pg(sqlx::postgres::PgRow),
    Owned(OwnedRow),
}

/// Column types the store reads.
pub(crate) trait FromCol: Sized {
    /// From a sqlx SQLite row.
    fn sqlite(r: &sqlx::sqlite::SqliteRow, name: &str) -> Result<Self, sqlx::Error>;
    /// From a sqlx PostgreSQL row.
    fn pg(r: &sqlx::postgres::PgRow, name: &str) -> Result<Self, sqlx::Error>;
    /// From a value read on the SQLite writer; `None` when the type does not fit.
    fn owned(v: &Val) -> Option<Self>;
}

/// `FromCol` for types sqlx decodes on both backends.
macro_rules! from_col {
    ($t:ty, $owned:expr) => {
        impl FromCol for $t {
            fn sqlite(r: &sqlx::sqlite::SqliteRow, name: &str) -> Result<Self, sqlx::Error> {
                sqlx::Row::try_get(r, name)
            }
            fn pg(r: &sqlx::postgres::PgRow, name: &str) -> Result<Self, sqlx::Error> {
                sqlx::Row::try_get(r, name)
            }
            fn owned(v: &Val) -> Option<Self> {
                let f: fn(&Val) -> Option<Self> = $owned;
                f(v)
            }
        }
    };
}

from_col!(i64, |v| match v {
    Val::Int(i) => Some(*i),
    _ => None,
});
from_col!(String, |v| match v {
    Val::Text(s) => Some(s.clone()),
    _ => None,
});
from_col!(Option<i64>, |v| match v {
    Val::Null => Some(None),
    Val::Int(i) => Some(Some(*i)),
    _ => None,
});
from_col!(Option<String>, |v| match v {
    Val::Null => Some(None),
    Val::Text(s) => Some(Some(s.clone())),
    _ => None,
});

impl Row {
    /// Decodes column `name`; a missing column or a value of another type is corrupt data.
    pub(crate) fn try_get<T: FromCol>(&self, name: &str) -> StoreResult<T> {
        match self {
            Row::Sqlite(r) => T::sqlite(r, name).map_err(StoreError::from),
            Row::Pg(r) => T::pg(r, name).map_err(StoreError::from),
            Row::Owned(r) => {
                let v = r.value(name)?;
                T::owned(v).ok_or_else(|| {
                    StoreError::Corrupt(format!("column {name} holds an unexpected type"))
                })
            }
        }
    }

    /// Decodes JSON column `name`.
    pub(crate) fn json(&self, name: &str) -> StoreResult<Value> {
        self.opt_json(name)?
            .ok_or_else(|| StoreError::Corrupt(format!("column {name} is NULL")))
    }

    /// Decodes nullable JSON column `name`.
    pub(crate) fn opt_json(&self, name: &str) -> StoreResult<Option<Value>> {
        use sqlx::Row as _;
        match self {
            Row::Sqlite(r) => Ok(r
                .try_get::<Option<sqlx::types::Json<Value>>, _>(name)?
                .map(|j| j.0)),
            Row::Pg(r) => Ok(r
                .try_get::<Option<sqlx::types::Json<Value>>, _>(name)?
                .map(|j| j.0)),
            Row::Owned(r) => match r.value(name)? {
                Val::Null => Ok(None),
                Val::Text(t) => serde_json::from_str(t)
                    .map(Some)
                    .map_err(|e| StoreError::Corrupt(format!("column {name}: {e}"))),
                Val::Blob(b) => serde_json::from_slice(b)
                    .map(Some)
                    .map_err(|e| StoreError::Corrupt(format!("column {name}: {e}"))),
                Val::Int(_) | Val::Real => Err(StoreError::Corrupt(format!(
                    "column {name} holds a number, not JSON"
                ))),
            },
        }
    }
}

impl OwnedRow {
    fn value(&self, name: &str) -> StoreResult<&Val> {
        self.names
            .iter()
            .position(|n| n == name)
            .and_then(|i| self.values.get(i))
            .ok_or_else(|| StoreError::Corrupt(format!("no column {name}")))
    }
}

/// A failed statement.
#[derive(Debug)]
pub(crate) enum DbError {
    Sqlx(sqlx::Error),
    Sqlite(rusqlite::Error),
    /// `fetch_one` found no row.
    NoRow,
    /// A statement's placeholders do not match its parameters (a bug in the store's SQL).
    Bind(String),
    /// A stored value could not be read.
    Decode(String),
}

/// Result of running a statement.
pub(crate) type DbResult<T> = Result<T, DbError>;

impl From<sqlx::Error> for DbError {
    fn from(e: sqlx::Error) -> Self {
        DbError::Sqlx(e)
    }
}

impl From<rusqlite::Error> for DbError {
    fn from(e: rusqlite::Error) -> Self {
        DbError::Sqlite(e)
    }
}

impl DbError {
    /// The store's error for a failed insert: a broken unique constraint is a duplicate `kind`,
    /// anything else a storage error.
    pub(crate) fn or_duplicate(self, kind: &'static str) -> StoreError {
        if self.is_unique_violation() {
            StoreError::Duplicate { kind }
        } else {
            self.into()
        }
    }

    /// Whether the statement broke a unique constraint (a duplicate id).
    pub(crate) fn is_unique_violation(&self) -> bool {
        match self {
            DbError::Sqlx(e) => crate::error::is_unique_violation(e),
            DbError::Sqlite(rusqlite::Error::SqliteFailure(e, _)) => matches!(
                e.extended_code,
                rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                    | rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
            ),
            _ => false,
        }
    }
}

impl From<DbError> for StoreError {
    fn from(e: DbError) -> Self {
        match e {
            DbError::Sqlx(e) => e.into(),
            DbError::Sqlite(rusqlite::Error::SqliteFailure(code, message)) => {
                let text = message.unwrap_or_else(|| code.to_string());
                match code.code {
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked => {
                        StoreError::Unavailable(text)
                    }
                    _ => StoreError::Backend(text),
                }
            }
            DbError::Sqlite(e) => StoreError::Backend(e.to_string()),
            DbError::NoRow => StoreError::Backend("a statement returned no row".into()),
            DbError::Bind(e) => StoreError::Backend(e),
            DbError::Decode(e) => StoreError::Corrupt(e),
        }
    }
}
