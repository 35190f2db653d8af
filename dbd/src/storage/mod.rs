//! Accounting storage over sqlx, one schema for SQLite, MariaDB/MySQL and
//! PostgreSQL.
//!
//! Map:
//! - [`StorageTarget`]: which database (built from slurmdbd.conf or a URL).
//! - [`Storage::open`]: connect (creating the database when the server has
//!   none), then migrate the schema to [`schema::LATEST`].
//! - `admin`: clusters, accounts, users, associations, QOS.
//! - `ingest`: the controller's records, exactly once per `(cluster, seq)`.
//! - `jobs`: sacct's queries.
//! - `resvs`: reservations' records and what jobs used of them.
//! - `rollup`: hourly/daily/monthly usage, purge.
//!
//! Invariants: every change is one transaction; a request that fails changes
//! nothing. Every writer (ingestion, administration, rollup) holds one lock in
//! the process, so writes apply one after another: no lock-upgrade deadlocks
//! on SQLite, and batches from a cluster's outbox apply in the order sent.

pub mod admin;
pub mod events;
pub mod ingest;
pub mod jobs;
pub mod resvs;
pub mod rollup;
pub mod schema;
pub mod sql;
pub mod time;
pub mod txns;

pub use sql::Backend;

use sql::{RowExt, Q};
use sqlx::any::AnyPoolOptions;
use sqlx::{AnyPool, Connection, Executor};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("cannot connect to {target}: {source}")]
    Connect { target: String, source: sqlx::Error },
    #[error("database error: {0}")]
    Sql(#[from] sqlx::Error),
    #[error(
        "the database schema is version {found}, newer than this slurmdbd supports \
         ({supported}); run a newer slurmdbd"
    )]
    NewerSchema { found: u32, supported: u32 },
    #[error("migration to schema version {version} ({name}) failed: {source}")]
    Migration {
        version: u32,
        name: &'static str,
        source: sqlx::Error,
    },
    #[error("invalid storage location: {0}")]
    BadTarget(String),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Exists(String),
    #[error("{0}")]
    InUse(String),
}

pub type Result<T> = std::result::Result<T, StorageError>;

/// Where the accounting database is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageTarget {
    pub backend: Backend,
    pub host: String,
    pub port: Option<u16>,
    pub user: Option<String>,
    pub pass: Option<String>,
    /// Database name; for SQLite the file path.
    pub database: String,
}

fn pct(s: &str) -> String {
    pct_keep(s, b"-._~")
}

/// Percent-encode every byte but ASCII alphanumerics and `keep`.
fn pct_keep(s: &str, keep: &[u8]) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || keep.contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn unpct(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("");
            if let Ok(v) = u8::from_str_radix(hex, 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl StorageTarget {
    pub fn sqlite(path: impl Into<PathBuf>) -> StorageTarget {
        StorageTarget {
            backend: Backend::Sqlite,
            host: String::new(),
            port: None,
            user: None,
            pass: None,
            database: path.into().to_string_lossy().into_owned(),
        }
    }

    /// `sqlite:PATH`, `mysql://[user[:pass]@]host[:port]/db`,
    /// `postgres://[user[:pass]@]host[:port]/db` (`postgresql://` too).
    pub fn from_url(url: &str) -> Result<StorageTarget> {
        let bad = || StorageError::BadTarget(url.to_string());
        let (scheme, rest) = url.split_once(':').ok_or_else(bad)?;
        let backend = match scheme {
            "sqlite" => {
                let p = rest.trim_start_matches("//");
                let p = p.split('?').next().unwrap_or(p);
                return Ok(StorageTarget::sqlite(p));
            }
            "mysql" | "mariadb" => Backend::Mysql,
            "postgres" | "postgresql" => Backend::Postgres,
            _ => return Err(bad()),
        };
        let rest = rest.strip_prefix("//").ok_or_else(bad)?;
        let rest = rest.split('?').next().unwrap_or(rest);
        let (auth_host, db) = rest.split_once('/').unwrap_or((rest, ""));
        let (auth, hostport) = match auth_host.rsplit_once('@') {
            Some((a, h)) => (Some(a), h),
            None => (None, auth_host),
        };
        let (user, pass) = match auth {
            Some(a) => match a.split_once(':') {
                Some((u, p)) => (Some(unpct(u)), Some(unpct(p))),
                None => (Some(unpct(a)), None),
            },
            None => (None, None),
        };
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p.parse().map_err(|_| bad())?)),
            None => (hostport.to_string(), None),
        };
        if host.is_empty() {
            return Err(bad());
        }
        Ok(StorageTarget {
            backend,
            host,
            port,
            user,
            pass,
            database: unpct(db),
        })
    }

    /// The same server, another database.
    pub fn with_database(&self, db: &str) -> StorageTarget {
        StorageTarget {
            database: db.to_string(),
            ..self.clone()
        }
    }

    /// The sqlx URL; `db` overrides the database (`Some("")`: none).
    pub fn url(&self, db: Option<&str>) -> String {
        if self.backend == Backend::Sqlite {
            return format!("sqlite://{}?mode=rwc", pct_keep(&self.database, b"-._~/"));
        }
        let (scheme, port) = match self.backend {
            Backend::Mysql => ("mysql", 3306),
            _ => ("postgres", 5432),
        };
        let auth = match (&self.user, &self.pass) {
            (Some(u), Some(p)) => format!("{}:{}@", pct(u), pct(p)),
            (Some(u), None) => format!("{}@", pct(u)),
            (None, Some(p)) => format!(":{}@", pct(p)),
            (None, None) => String::new(),
        };
        let db = db.unwrap_or(&self.database);
        format!(
            "{scheme}://{auth}{}:{}/{}",
            self.host,
            self.port.unwrap_or(port),
            pct(db)
        )
    }

    /// For messages: the URL without the password.
    pub fn display(&self) -> String {
        StorageTarget {
            pass: self.pass.as_ref().map(|_| "xxx".into()),
            ..self.clone()
        }
        .url(None)
    }
}

/// What `open` may do to the schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Migrate {
    /// Up to the newest version (the daemon).
    Latest,
    /// Stop at this version (tests of upgrades).
    UpTo(u32),
}

/// The accounting database.
pub struct Storage {
    pub(crate) pool: AnyPool,
    pub(crate) backend: Backend,
    pub(crate) write_lock: tokio::sync::Mutex<()>,
    target: StorageTarget,
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Storage({})", self.target.display())
    }
}

fn is_missing_database(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(d) => {
            d.code().as_deref() == Some("3D000")
                || d.message().contains("Unknown database")
                || d.message().contains("does not exist")
        }
        _ => false,
    }
}

async fn connect_pool(target: &StorageTarget, db: Option<&str>) -> Result<AnyPool> {
    sqlx::any::install_default_drivers();
    let sqlite = target.backend == Backend::Sqlite;
    if sqlite {
        if let Some(dir) = std::path::Path::new(&target.database).parent() {
            if !dir.as_os_str().is_empty() && !dir.exists() {
                std::fs::create_dir_all(dir)
                    .map_err(|e| StorageError::BadTarget(format!("{}: {e}", dir.display())))?;
            }
        }
    }
    // One direct connection first: it fails at once with the real cause
    // (refused, unknown database, bad password) where the pool would retry
    // until its timeout and report only that.
    let url = target.url(db);
    let probe =
        sqlx::AnyConnection::connect(&url)
            .await
            .map_err(|source| StorageError::Connect {
                target: target.display(),
                source,
            })?;
    let _ = probe.close().await;
    AnyPoolOptions::new()
        .max_connections(if sqlite { 4 } else { 8 })
        .acquire_timeout(Duration::from_secs(30))
        .after_connect(move |conn, _| {
            Box::pin(async move {
                if sqlite {
                    conn.execute("PRAGMA journal_mode=WAL").await?;
                    conn.execute("PRAGMA synchronous=FULL").await?;
                    conn.execute("PRAGMA busy_timeout=30000").await?;
                }
                Ok(())
            })
        })
        .connect(&url)
        .await
        .map_err(|source| StorageError::Connect {
            target: target.display(),
            source,
        })
}

impl Storage {
    /// A transaction that will write. On SQLite it takes the write lock at
    /// once (`BEGIN IMMEDIATE`): a deferred one that reads first cannot
    /// wait for the lock when it comes to write after another writer, and
    /// fails with "database is locked" whatever the busy timeout.
    pub(crate) async fn write_tx(&self) -> sqlx::Result<sqlx::Transaction<'static, sqlx::Any>> {
        match self.backend {
            Backend::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await,
            _ => self.pool.begin().await,
        }
    }

    /// Connect and bring the schema to the newest version.
    pub async fn open(target: &StorageTarget) -> Result<Storage> {
        Storage::open_with(target, Migrate::Latest).await
    }

    pub async fn open_with(target: &StorageTarget, migrate: Migrate) -> Result<Storage> {
        let pool = match connect_pool(target, None).await {
            Ok(p) => p,
            Err(StorageError::Connect { source, .. })
                if target.backend != Backend::Sqlite && is_missing_database(&source) =>
            {
                Storage::create_database(target).await?;
                connect_pool(target, None).await?
            }
            Err(e) => return Err(e),
        };
        let s = Storage {
            pool,
            backend: target.backend,
            write_lock: tokio::sync::Mutex::new(()),
            target: target.clone(),
        };
        let upto = match migrate {
            Migrate::Latest => schema::LATEST,
            Migrate::UpTo(v) => v.min(schema::LATEST),
        };
        s.migrate(upto).await?;
        Ok(s)
    }

    /// `CREATE DATABASE` on the server of `target` (not SQLite).
    pub async fn create_database(target: &StorageTarget) -> Result<()> {
        let (admin_db, sql) = match target.backend {
            Backend::Sqlite => return Ok(()),
            Backend::Mysql => (
                "",
                format!(
                    "CREATE DATABASE IF NOT EXISTS `{}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
                    target.database.replace('`', "")
                ),
            ),
            Backend::Postgres => (
                "postgres",
                format!("CREATE DATABASE \"{}\"", target.database.replace('"', "")),
            ),
        };
        let pool = connect_pool(target, Some(admin_db)).await?;
        let r = pool.execute(sql.as_str()).await;
        pool.close().await;
        r?;
        tracing::info!("created database {}", target.display());
        Ok(())
    }

    /// `DROP DATABASE` (tests and benchmarks clean up with it); for SQLite
    /// removes the file.
    pub async fn drop_database(target: &StorageTarget) -> Result<()> {
        let (admin_db, sql) = match target.backend {
            Backend::Sqlite => {
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", target.database));
                }
                return Ok(());
            }
            Backend::Mysql => (
                "",
                format!(
                    "DROP DATABASE IF EXISTS `{}`",
                    target.database.replace('`', "")
                ),
            ),
            Backend::Postgres => (
                "postgres",
                format!(
                    "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
                    target.database.replace('"', "")
                ),
            ),
        };
        let pool = connect_pool(target, Some(admin_db)).await?;
        let r = pool.execute(sql.as_str()).await;
        pool.close().await;
        r?;
        Ok(())
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    pub fn target(&self) -> &StorageTarget {
        &self.target
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// The version the database is at (0: empty).
    pub async fn schema_version(&self) -> Result<u32> {
        let b = self.backend;
        self.pool
            .execute(b.ddl(schema::VERSION_TABLE).as_str())
            .await?;
        let row = Q::new("SELECT version FROM schema_version WHERE id=1")
            .fetch_optional(b, &self.pool)
            .await?;
        Ok(match row {
            Some(r) => r.u32("version")?,
            None => 0,
        })
    }

    async fn migrate(&self, upto: u32) -> Result<()> {
        let b = self.backend;
        let found = self.schema_version().await?;
        if found > schema::LATEST {
            return Err(StorageError::NewerSchema {
                found,
                supported: schema::LATEST,
            });
        }
        let now = slurm_common::auth::now();
        if found == 0 {
            let mut q = Q::new("INSERT INTO schema_version (id, version, updated) VALUES (1, 0, ");
            q.bind(now).push(")").push(&b.if_absent(&["id"]));
            q.execute(b, &self.pool).await?;
        }
        for m in schema::MIGRATIONS
            .iter()
            .filter(|m| m.version > found && m.version <= upto)
        {
            tracing::info!(
                "upgrading the accounting schema to version {} ({})",
                m.version,
                m.name
            );
            let err = |source| StorageError::Migration {
                version: m.version,
                name: m.name,
                source,
            };
            // PostgreSQL and SQLite run DDL in the transaction; MySQL commits
            // each statement, so a failed migration there is re-run by hand.
            let mut tx = self.write_tx().await.map_err(err)?;
            for stmt in schema::statements(m, b) {
                tx.execute(stmt.as_str()).await.map_err(err)?;
            }
            schema::set_version(m.version, now)
                .execute(b, &mut *tx)
                .await
                .map_err(err)?;
            tx.commit().await.map_err(err)?;
        }
        Ok(())
    }

    /// Set the recorded schema version (tests: pretend a newer daemon ran).
    pub async fn force_schema_version(&self, version: u32) -> Result<()> {
        schema::set_version(version, slurm_common::auth::now())
            .execute(self.backend, &self.pool)
            .await?;
        Ok(())
    }

    /// Run raw SQL (tests that build an old schema by hand).
    pub async fn execute_raw(&self, sql: &str) -> Result<u64> {
        Ok(Q::new(sql).execute(self.backend, &self.pool).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_round_trip() {
        let t = StorageTarget::from_url("mysql://root@127.0.0.1:3306/test").unwrap();
        assert_eq!(t.backend, Backend::Mysql);
        assert_eq!((t.host.as_str(), t.port), ("127.0.0.1", Some(3306)));
        assert_eq!(t.user.as_deref(), Some("root"));
        assert_eq!(t.url(None), "mysql://root@127.0.0.1:3306/test");
        let t = StorageTarget::from_url("postgresql://u:p%40ss@db/acct").unwrap();
        assert_eq!(t.pass.as_deref(), Some("p@ss"));
        assert_eq!(t.url(None), "postgres://u:p%40ss@db:5432/acct");
        assert_eq!(t.display(), "postgres://u:xxx@db:5432/acct");
        let t = StorageTarget::from_url("sqlite:///tmp/x.db").unwrap();
        assert_eq!(t.database, "/tmp/x.db");
        assert_eq!(
            StorageTarget::sqlite("/tmp/a b?#.db").url(None),
            "sqlite:///tmp/a%20b%3F%23.db?mode=rwc"
        );
        assert!(StorageTarget::from_url("oracle://x/y").is_err());
        assert!(StorageTarget::from_url("mysql://:1/x").is_err());
        assert_eq!(unpct("%4"), "%4");
        assert_eq!(unpct("a%20"), "a ");
        assert_eq!(unpct("%é"), "%é");
    }
}
