//! The small SQL layer the storage code is written in: a query builder with
//! `?` placeholders (rewritten to `$n` for PostgreSQL), typed bind values
//! (so a NULL keeps its type on every backend), the few per-backend spellings
//! (upsert, insert-if-absent, DDL types), and row accessors that tolerate
//! MySQL reporting TEXT columns as blobs.

use sqlx::any::{AnyArguments, AnyRow};
use sqlx::{Any, Executor, Row};

/// Which database server (or file) holds the accounting data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    Sqlite,
    Mysql,
    Postgres,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Mysql => "mysql",
            Backend::Postgres => "pgsql",
        }
    }

    /// Fill the DDL template holes: `{id}` an auto-increment primary key,
    /// `{text}` long text, `{longtext}` text of megabytes (MySQL's TEXT
    /// stops at 64 KiB), `{dbl}` a double, `{opts}` table options.
    pub fn ddl(self, t: &str) -> String {
        let (id, opts) = match self {
            Backend::Sqlite => ("INTEGER PRIMARY KEY AUTOINCREMENT", ""),
            Backend::Mysql => (
                "BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY",
                " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
            ),
            Backend::Postgres => ("BIGSERIAL PRIMARY KEY", ""),
        };
        let longtext = match self {
            Backend::Mysql => "LONGTEXT",
            _ => "TEXT",
        };
        t.replace("{id}", id)
            .replace("{longtext}", longtext)
            .replace("{text}", "TEXT")
            .replace("{dbl}", "DOUBLE PRECISION")
            .replace("{opts}", opts)
    }

    /// The tail of an INSERT that updates `update` columns when a row with
    /// the same `key` exists.
    pub fn upsert(self, key: &[&str], update: &[&str]) -> String {
        match self {
            Backend::Mysql => {
                let sets: Vec<String> = update.iter().map(|c| format!("{c}=VALUES({c})")).collect();
                format!(" ON DUPLICATE KEY UPDATE {}", sets.join(","))
            }
            _ => {
                let sets: Vec<String> =
                    update.iter().map(|c| format!("{c}=excluded.{c}")).collect();
                format!(
                    " ON CONFLICT ({}) DO UPDATE SET {}",
                    key.join(","),
                    sets.join(",")
                )
            }
        }
    }

    /// The tail of an INSERT that does nothing when the row exists
    /// (MySQL's INSERT IGNORE would also swallow other errors).
    pub fn if_absent(self, key: &[&str]) -> String {
        match self {
            Backend::Mysql => format!(" ON DUPLICATE KEY UPDATE {0}={0}", key[0]),
            _ => format!(" ON CONFLICT ({}) DO NOTHING", key.join(",")),
        }
    }

    /// `SELECT ... FOR UPDATE` where the backend has it (SQLite locks the
    /// whole database on the first write anyway).
    pub fn for_update(self) -> &'static str {
        match self {
            Backend::Sqlite => "",
            _ => " FOR UPDATE",
        }
    }
}

/// A bind value with its type, even when NULL.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    I(Option<i64>),
    F(Option<f64>),
    S(Option<String>),
}

impl From<i64> for Val {
    fn from(v: i64) -> Val {
        Val::I(Some(v))
    }
}
impl From<u64> for Val {
    fn from(v: u64) -> Val {
        Val::I(Some(v.min(i64::MAX as u64) as i64))
    }
}
impl From<u32> for Val {
    fn from(v: u32) -> Val {
        Val::I(Some(i64::from(v)))
    }
}
impl From<i32> for Val {
    fn from(v: i32) -> Val {
        Val::I(Some(i64::from(v)))
    }
}
impl From<Option<i64>> for Val {
    fn from(v: Option<i64>) -> Val {
        Val::I(v)
    }
}
impl From<Option<u64>> for Val {
    fn from(v: Option<u64>) -> Val {
        Val::I(v.map(|x| x.min(i64::MAX as u64) as i64))
    }
}
impl From<Option<u32>> for Val {
    fn from(v: Option<u32>) -> Val {
        Val::I(v.map(i64::from))
    }
}
impl From<f64> for Val {
    fn from(v: f64) -> Val {
        Val::F(Some(v))
    }
}
impl From<&str> for Val {
    fn from(v: &str) -> Val {
        Val::S(Some(v.to_string()))
    }
}
impl From<String> for Val {
    fn from(v: String) -> Val {
        Val::S(Some(v))
    }
}
impl From<&String> for Val {
    fn from(v: &String) -> Val {
        Val::S(Some(v.clone()))
    }
}
impl From<Option<String>> for Val {
    fn from(v: Option<String>) -> Val {
        Val::S(v)
    }
}
impl From<Option<&str>> for Val {
    fn from(v: Option<&str>) -> Val {
        Val::S(v.map(str::to_string))
    }
}

/// A statement being built: SQL with `?` holes and the values for them.
/// Never put a literal `?` in the SQL text.
#[derive(Debug, Clone, Default)]
pub struct Q {
    sql: String,
    args: Vec<Val>,
}

impl Q {
    pub fn new(sql: &str) -> Q {
        Q {
            sql: sql.to_string(),
            args: Vec::new(),
        }
    }

    pub fn push(&mut self, sql: &str) -> &mut Q {
        self.sql.push_str(sql);
        self
    }

    /// Append a `?` bound to `v`.
    pub fn bind(&mut self, v: impl Into<Val>) -> &mut Q {
        self.sql.push('?');
        self.args.push(v.into());
        self
    }

    /// Append `(?,?,...)` bound to `vals`.
    pub fn bind_tuple(&mut self, vals: Vec<Val>) -> &mut Q {
        self.sql.push('(');
        for (i, v) in vals.into_iter().enumerate() {
            if i > 0 {
                self.sql.push(',');
            }
            self.sql.push('?');
            self.args.push(v);
        }
        self.sql.push(')');
        self
    }

    /// Append ` AND col IN (?,...)` when `vals` is not empty.
    pub fn and_in<V: Into<Val> + Clone>(&mut self, col: &str, vals: &[V]) -> &mut Q {
        if !vals.is_empty() {
            self.sql.push_str(" AND ");
            self.sql.push_str(col);
            self.sql.push_str(" IN ");
            self.bind_tuple(vals.iter().cloned().map(Into::into).collect());
        }
        self
    }

    /// Append ` AND cluster IN (...)` for `clusters` as given (names are
    /// kept lower-case; blanks around them dropped).
    pub fn and_clusters(&mut self, clusters: &[String]) -> &mut Q {
        let lower: Vec<String> = clusters
            .iter()
            .map(|c| c.trim().to_ascii_lowercase())
            .collect();
        self.and_in("cluster", &lower)
    }

    pub fn arg_count(&self) -> usize {
        self.args.len()
    }

    /// The SQL text for `b`.
    pub fn text(&self, b: Backend) -> String {
        if b != Backend::Postgres {
            return self.sql.clone();
        }
        let mut out = String::with_capacity(self.sql.len() + 16);
        let mut n = 0;
        for c in self.sql.chars() {
            if c == '?' {
                n += 1;
                out.push('$');
                out.push_str(&n.to_string());
            } else {
                out.push(c);
            }
        }
        out
    }

    fn arguments(&self) -> AnyArguments<'static> {
        use sqlx::Arguments;
        let mut a = AnyArguments::default();
        for v in &self.args {
            // Binding owned scalars into AnyArguments cannot fail.
            let _ = match v {
                Val::I(x) => a.add(*x),
                Val::F(x) => a.add(*x),
                Val::S(x) => a.add(x.clone()),
            };
        }
        a
    }

    pub async fn execute<'e, E>(&self, b: Backend, e: E) -> Result<u64, sqlx::Error>
    where
        E: Executor<'e, Database = Any>,
    {
        let sql = self.text(b);
        let r = sqlx::query_with(&sql, self.arguments()).execute(e).await?;
        Ok(r.rows_affected())
    }

    pub async fn fetch_all<'e, E>(&self, b: Backend, e: E) -> Result<Vec<AnyRow>, sqlx::Error>
    where
        E: Executor<'e, Database = Any>,
    {
        let sql = self.text(b);
        sqlx::query_with(&sql, self.arguments()).fetch_all(e).await
    }

    pub async fn fetch_optional<'e, E>(
        &self,
        b: Backend,
        e: E,
    ) -> Result<Option<AnyRow>, sqlx::Error>
    where
        E: Executor<'e, Database = Any>,
    {
        let sql = self.text(b);
        sqlx::query_with(&sql, self.arguments())
            .fetch_optional(e)
            .await
    }
}

/// Column accessors by name. Integer columns are BIGINT everywhere.
pub trait RowExt {
    fn i(&self, col: &str) -> Result<i64, sqlx::Error>;
    fn oi(&self, col: &str) -> Result<Option<i64>, sqlx::Error>;
    fn u(&self, col: &str) -> Result<u64, sqlx::Error> {
        Ok(self.i(col)?.max(0) as u64)
    }
    fn u32(&self, col: &str) -> Result<u32, sqlx::Error> {
        Ok(self.i(col)?.clamp(0, i64::from(u32::MAX)) as u32)
    }
    fn ou(&self, col: &str) -> Result<Option<u64>, sqlx::Error> {
        Ok(self.oi(col)?.map(|v| v.max(0) as u64))
    }
    fn ou32(&self, col: &str) -> Result<Option<u32>, sqlx::Error> {
        Ok(self
            .oi(col)?
            .map(|v| v.clamp(0, i64::from(u32::MAX)) as u32))
    }
    fn f(&self, col: &str) -> Result<f64, sqlx::Error>;
    fn os(&self, col: &str) -> Result<Option<String>, sqlx::Error>;
    fn s(&self, col: &str) -> Result<String, sqlx::Error> {
        Ok(self.os(col)?.unwrap_or_default())
    }
}

impl RowExt for AnyRow {
    fn i(&self, col: &str) -> Result<i64, sqlx::Error> {
        Ok(self.try_get::<Option<i64>, _>(col)?.unwrap_or(0))
    }
    fn oi(&self, col: &str) -> Result<Option<i64>, sqlx::Error> {
        self.try_get::<Option<i64>, _>(col)
    }
    fn f(&self, col: &str) -> Result<f64, sqlx::Error> {
        Ok(self.try_get::<Option<f64>, _>(col)?.unwrap_or(0.0))
    }
    fn os(&self, col: &str) -> Result<Option<String>, sqlx::Error> {
        match self.try_get::<Option<String>, _>(col) {
            Ok(v) => Ok(v),
            // MySQL reports TEXT as a blob type.
            Err(_) => Ok(self
                .try_get::<Option<Vec<u8>>, _>(col)?
                .map(|b| String::from_utf8_lossy(&b).into_owned())),
        }
    }
}

/// Split a comma list stored in one column.
pub fn split_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_and_dialects() {
        let mut q = Q::new("SELECT a FROM t WHERE x=");
        q.bind(1i64).and_in("y", &["a", "b"]);
        assert_eq!(
            q.text(Backend::Sqlite),
            "SELECT a FROM t WHERE x=? AND y IN (?,?)"
        );
        assert_eq!(
            q.text(Backend::Postgres),
            "SELECT a FROM t WHERE x=$1 AND y IN ($2,$3)"
        );
        assert_eq!(q.arg_count(), 3);
        assert_eq!(
            Backend::Mysql.upsert(&["k"], &["a", "b"]),
            " ON DUPLICATE KEY UPDATE a=VALUES(a),b=VALUES(b)"
        );
        assert_eq!(
            Backend::Postgres.upsert(&["k", "l"], &["a"]),
            " ON CONFLICT (k,l) DO UPDATE SET a=excluded.a"
        );
        assert!(Backend::Mysql
            .ddl("x {id}{opts}")
            .contains("AUTO_INCREMENT"));
    }
}
