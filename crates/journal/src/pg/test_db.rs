//! A database of its own for each PostgreSQL test, on the PostgreSQL `CLOSEDLOOP_PG_URL` names.

use crate::Journal;
use sqlx::Connection;
use sqlx::postgres::PgConnection;

/// A database of its own on the machine's PostgreSQL, dropped when this goes.
pub(super) struct Database {
    admin: String,
    name: String,
    pub(super) url: String,
}

impl Database {
    /// `None` (after saying so) when `CLOSEDLOOP_PG_URL` is not set.
    pub(super) async fn create(test: &str) -> Option<Database> {
        let Ok(admin) = std::env::var("CLOSEDLOOP_PG_URL") else {
            eprintln!("{test}: skipped, CLOSEDLOOP_PG_URL is not set (no PostgreSQL to test)");
            return None;
        };
        let name = format!("closedloop_{test}_{}", std::process::id());
        let mut c = PgConnection::connect(&admin).await.unwrap();
        for statement in [
            format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
            format!("CREATE DATABASE {name}"),
        ] {
            sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
                .execute(&mut c)
                .await
                .unwrap();
        }
        let (base, _) = admin.rsplit_once('/').unwrap();
        let url = format!("{base}/{name}");
        Some(Database { admin, name, url })
    }

    pub(super) async fn journal(&self) -> Journal {
        Journal::open(&self.url).await.unwrap()
    }

    pub(super) async fn sql(&self, statement: &str) {
        let mut c = PgConnection::connect(&self.url).await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(statement.to_string()))
            .execute(&mut c)
            .await
            .unwrap();
    }

    pub(super) async fn drop(self) {
        let mut c = PgConnection::connect(&self.admin).await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        )))
        .execute(&mut c)
        .await
        .unwrap();
    }
}
