//! The PostgreSQL state store (`state_store: {url: postgres://…}`): one row per thread in one
//! table, so several toolhost processes (replicas behind a load balancer) share thread state.
//! A turn is one transaction that locks the thread's row (`SELECT … FOR UPDATE`), merges the
//! updates with DeerFlow's reducers and writes the row back: two replicas never interleave the
//! updates of one thread, and none is lost. Nothing is cached in the process; every read goes to
//! the database. Connections come from a small pool that replaces a broken connection on its next
//! use, so a restarted server is picked up again without restarting toolhost.

use std::str::FromStr as _;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime};
use tokio_postgres::config::Host;
use toolhost_core::{StateUpdate, ThreadFs, ThreadState};

use super::{StateError, StateStore, StateStoreConfig, TurnResults};

/// The table thread state lives in: `thread_id text PRIMARY KEY, state text, updated_at`.
/// `state` is the same JSON as the embedded store's `state.json`, kept as text so that a row is
/// stored exactly as written (key order included) and a damaged one can still be read and named.
pub const POSTGRES_TABLE: &str = "toolhost_thread_state";
/// The version of the table layout, kept in `toolhost_schema` (`name = 'thread_state'`). A
/// database whose version is newer than this is refused rather than written in an old layout.
pub const POSTGRES_SCHEMA_VERSION: i32 = 1;
/// Serializes schema creation among replicas starting at once (`pg_advisory_xact_lock`).
const SCHEMA_LOCK_KEY: i64 = 0x746f_6f6c_686f_7374; // "toolhost"
/// A stored state larger than this is refused rather than parsed (the embedded store's cap).
const STATE_MAX_BYTES: usize = 64 << 20;
/// How long connecting may take when the URL does not say (`connect_timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one statement may run (a row lock held by a stuck replica included) when the URL
/// sets no `options`; a turn's transaction takes milliseconds.
const STATEMENT_TIMEOUT_MS: u32 = 30_000;

/// Thread state in PostgreSQL.
pub struct PostgresStateStore {
    pool: Pool,
    /// `host:port/dbname`, for messages (never the password).
    target: String,
    /// Set once the schema is known to be in place.
    schema: tokio::sync::OnceCell<()>,
}

impl PostgresStateStore {
    /// A store for `config.url`. Nothing is connected yet: the first use (or
    /// [`check`](Self::check)) connects and creates the table if it is missing.
    pub fn new(config: &StateStoreConfig) -> Result<Self, StateError> {
        let url = config.url.trim();
        if url.is_empty() {
            return Err(StateError::Config(
                "is empty (is the $VARIABLE it names set in toolhost's environment?); give postgres://user:password@host:port/dbname".into(),
            ));
        }
        let mut pg = tokio_postgres::Config::from_str(url).map_err(|e| {
            StateError::Config(format!(
                "not a PostgreSQL connection URL ({e}); give postgres://user:password@host:port/dbname"
            ))
        })?;
        if pg.get_hosts().is_empty() {
            return Err(StateError::Config("names no host; give postgres://user:password@host:port/dbname".into()));
        }
        if pg.get_user().is_none() {
            return Err(StateError::Config("names no user; give postgres://user:password@host:port/dbname".into()));
        }
        if !(1..=64).contains(&config.pool_size) {
            return Err(StateError::Config(format!(
                "state_store.pool_size must be between 1 and 64, not {}",
                config.pool_size
            )));
        }
        if pg.get_connect_timeout().is_none() {
            pg.connect_timeout(CONNECT_TIMEOUT);
        }
        if pg.get_options().is_none() {
            pg.options(format!("-c statement_timeout={STATEMENT_TIMEOUT_MS}"));
        }
        pg.application_name("toolhost");
        let target = describe_target(&pg);
        let manager =
            Manager::from_config(pg, tokio_postgres::NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
        let pool = Pool::builder(manager)
            .max_size(config.pool_size)
            .runtime(Runtime::Tokio1)
            .create_timeout(Some(CONNECT_TIMEOUT + Duration::from_secs(1)))
            .wait_timeout(Some(Duration::from_secs(STATEMENT_TIMEOUT_MS as u64 / 1000 + 5)))
            .build()
            .map_err(|e| StateError::Config(format!("cannot set up the connection pool: {e}")))?;
        Ok(Self { pool, target, schema: tokio::sync::OnceCell::new() })
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, String> {
        self.pool.get().await.map_err(|e| match e {
            PoolError::Backend(e) => format!("cannot connect: {}", pg_message(&e)),
            PoolError::Timeout(_) => "cannot connect: timed out".to_string(),
            e => format!("cannot connect: {e}"),
        })
    }

    async fn ensure_schema(&self) -> Result<(), String> {
        self.schema
            .get_or_try_init(|| async {
                let mut client = self.client().await?;
                let tx = client.transaction().await.map_err(|e| pg_message(&e))?;
                // Two replicas starting at once must not both try to create the tables.
                tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK_KEY])
                    .await
                    .map_err(|e| pg_message(&e))?;
                tx.batch_execute(&format!(
                    "CREATE TABLE IF NOT EXISTS toolhost_schema (name text PRIMARY KEY, version integer NOT NULL);
                     CREATE TABLE IF NOT EXISTS {POSTGRES_TABLE} (
                         thread_id text PRIMARY KEY,
                         state text NOT NULL,
                         updated_at timestamptz NOT NULL DEFAULT now());"
                ))
                .await
                .map_err(|e| format!("cannot create the table {POSTGRES_TABLE}: {}", pg_message(&e)))?;
                tx.execute(
                    "INSERT INTO toolhost_schema (name, version) VALUES ('thread_state', $1) ON CONFLICT (name) DO NOTHING",
                    &[&POSTGRES_SCHEMA_VERSION],
                )
                .await
                .map_err(|e| pg_message(&e))?;
                let version: i32 = tx
                    .query_one("SELECT version FROM toolhost_schema WHERE name = 'thread_state'", &[])
                    .await
                    .and_then(|row| row.try_get(0))
                    .map_err(|e| pg_message(&e))?;
                if version > POSTGRES_SCHEMA_VERSION {
                    return Err(format!(
                        "the database's {POSTGRES_TABLE} is at schema version {version}, newer than this toolhost \
                         knows ({POSTGRES_SCHEMA_VERSION}); upgrade toolhost"
                    ));
                }
                tx.commit().await.map_err(|e| pg_message(&e))?;
                Ok(())
            })
            .await
            .map(|_| ())
    }

    fn database_error(&self, thread: &str, message: String) -> StateError {
        StateError::Database { thread: thread.to_string(), target: self.target.clone(), message }
    }

    fn parse(&self, thread: &str, text: &str) -> Result<ThreadState, StateError> {
        let where_ = format!("(row '{thread}' of {POSTGRES_TABLE})");
        if text.len() > STATE_MAX_BYTES {
            return Err(StateError::Corrupt {
                thread: thread.to_string(),
                message: format!("{} bytes, more than the {} allowed {where_}", text.len(), STATE_MAX_BYTES),
            });
        }
        serde_json::from_str(text)
            .map_err(|e| StateError::Corrupt { thread: thread.to_string(), message: format!("{e} {where_}") })
    }

    async fn apply_in_transaction(&self, thread: &str, updates: &[&StateUpdate]) -> Result<TurnResults, StateError> {
        let db = |e: tokio_postgres::Error| self.database_error(thread, pg_message(&e));
        let mut client = self.client().await.map_err(|m| self.database_error(thread, m))?;
        let tx = client.transaction().await.map_err(db)?;
        let insert = tx
            .prepare_cached(&format!(
                "INSERT INTO {POSTGRES_TABLE} (thread_id, state) VALUES ($1, '{{}}') ON CONFLICT (thread_id) DO NOTHING"
            ))
            .await
            .map_err(db)?;
        tx.execute(&insert, &[&thread]).await.map_err(db)?;
        // The row lock: another replica's turn of this thread waits here until this one commits.
        let select = tx
            .prepare_cached(&format!("SELECT state FROM {POSTGRES_TABLE} WHERE thread_id = $1 FOR UPDATE"))
            .await
            .map_err(db)?;
        let row = tx.query_one(&select, &[&thread]).await.map_err(db)?;
        let text: String = row.try_get(0).map_err(db)?;
        // A damaged row: the transaction is dropped (rolled back), the row left as it is.
        let mut state = self.parse(thread, &text)?;
        let results = state.apply_turn(updates.iter().copied());
        if results.iter().any(Result::is_ok) {
            let json = serde_json::to_string_pretty(&state)
                .map_err(|e| self.database_error(thread, format!("cannot serialize the state: {e}")))?;
            let update = tx
                .prepare_cached(&format!(
                    "UPDATE {POSTGRES_TABLE} SET state = $2, updated_at = now() WHERE thread_id = $1"
                ))
                .await
                .map_err(db)?;
            tx.execute(&update, &[&thread, &json]).await.map_err(db)?;
        }
        tx.commit().await.map_err(db)?;
        Ok(results)
    }
}

#[async_trait]
impl StateStore for PostgresStateStore {
    async fn get(&self, fs: &ThreadFs) -> Result<ThreadState, StateError> {
        let thread = fs.thread_id();
        self.ensure_schema().await.map_err(|m| self.database_error(thread, m))?;
        let client = self.client().await.map_err(|m| self.database_error(thread, m))?;
        let db = |e: tokio_postgres::Error| self.database_error(thread, pg_message(&e));
        let select = client
            .prepare_cached(&format!("SELECT state FROM {POSTGRES_TABLE} WHERE thread_id = $1"))
            .await
            .map_err(db)?;
        match client.query_opt(&select, &[&thread]).await.map_err(db)? {
            None => Ok(ThreadState::default()),
            Some(row) => {
                let text: String = row.try_get(0).map_err(db)?;
                self.parse(thread, &text)
            }
        }
    }

    async fn apply(&self, fs: &ThreadFs, updates: &[&StateUpdate]) -> Result<TurnResults, StateError> {
        if super::nothing_to_store(updates) {
            return Ok(updates.iter().map(|_| Ok(())).collect());
        }
        let thread = fs.thread_id();
        self.ensure_schema().await.map_err(|m| self.database_error(thread, m))?;
        self.apply_in_transaction(thread, updates).await
    }

    fn forget(&self, _thread_id: &str) {
        // Nothing is kept in memory.
    }

    async fn remove(&self, thread_id: &str) -> Result<(), StateError> {
        self.ensure_schema().await.map_err(|m| self.database_error(thread_id, m))?;
        let client = self.client().await.map_err(|m| self.database_error(thread_id, m))?;
        client
            .execute(&format!("DELETE FROM {POSTGRES_TABLE} WHERE thread_id = $1"), &[&thread_id])
            .await
            .map_err(|e| self.database_error(thread_id, pg_message(&e)))?;
        Ok(())
    }

    fn describe(&self) -> String {
        format!("PostgreSQL {} (table {POSTGRES_TABLE})", self.target)
    }

    /// Connect and make sure the table is there, so that a wrong URL or an unreachable server is
    /// reported at start-up.
    async fn check(&self) -> Result<(), StateError> {
        self.ensure_schema().await.map_err(|e| StateError::Config(format!("{} ({})", e, self.target)))
    }
}

/// `host:port/dbname` of a connection config.
fn describe_target(pg: &tokio_postgres::Config) -> String {
    let host = match pg.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "?".into(),
    };
    let port = pg.get_ports().first().copied().unwrap_or(5432);
    let db = pg.get_dbname().or(pg.get_user()).unwrap_or("?");
    format!("{host}:{port}/{db}")
}

/// A PostgreSQL error as a person can read it: the server's message for a database error,
/// otherwise the client's error with its cause (tokio-postgres' own text is often just "db error").
fn pg_message(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{}: {}", db.severity(), db.message());
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    if e.is_closed() && !text.contains("closed") {
        text.push_str(" (the connection was closed)");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str) -> StateStoreConfig {
        StateStoreConfig { url: url.into(), pool_size: 4 }
    }

    #[test]
    fn bad_urls_are_named_errors_and_never_echo_the_password() {
        for (url, expected) in [
            ("", "is empty"),
            ("   ", "is empty"),
            ("postgres://u:s3cret@h:notaport/db", "not a PostgreSQL connection URL"),
            ("mysql://u:s3cret@h/db", "not a PostgreSQL connection URL"),
            ("postgres:///db?user=u&password=s3cret", "names no host"),
        ] {
            let e = PostgresStateStore::new(&config(url)).err().unwrap_or_else(|| panic!("{url} was accepted"));
            let text = e.to_string();
            assert!(text.starts_with("state_store.url: "), "{url}: {text}");
            assert!(text.contains(expected), "{url}: {text}");
            assert!(!text.contains("s3cret"), "{url}: {text}");
        }
        let e =
            PostgresStateStore::new(&StateStoreConfig { url: "postgres://u@h/db".into(), pool_size: 0 }).err().unwrap();
        assert!(e.to_string().contains("pool_size"), "{e}");
    }

    #[test]
    fn the_target_names_host_port_and_database_not_the_password() {
        let s = PostgresStateStore::new(&config("postgres://toolhost:s3cret@10.0.0.5:6543/threads")).unwrap();
        assert_eq!(s.target, "10.0.0.5:6543/threads");
        assert!(!s.describe().contains("s3cret"));
        let s = PostgresStateStore::new(&config("host=db user=app")).unwrap();
        assert_eq!(s.target, "db:5432/app");
    }

    #[tokio::test]
    async fn an_unreachable_server_is_a_start_up_error_naming_the_setting() {
        // A port nobody listens on: bound, then closed.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let s = PostgresStateStore::new(&config(&format!("postgres://u:s3cret@127.0.0.1:{port}/db"))).unwrap();
        let e = s.check().await.unwrap_err().to_string();
        assert!(e.starts_with("state_store.url: cannot connect"), "{e}");
        assert!(e.contains(&format!("127.0.0.1:{port}/db")) && !e.contains("s3cret"), "{e}");
    }
}
