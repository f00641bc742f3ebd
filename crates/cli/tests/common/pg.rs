//! A database of its own on the machine's PostgreSQL for a test (`CLOSEDLOOP_PG_URL`), dropped
//! at the end; `None` (after saying so) when the variable is not set.

use sqlx::Connection;
use sqlx::postgres::PgConnection;

pub struct Database {
    admin: String,
    name: String,
    pub url: String,
}

impl Database {
    pub async fn create(test: &str) -> Option<Database> {
        let Ok(admin) = std::env::var("CLOSEDLOOP_PG_URL") else {
            eprintln!("{test}: skipped, CLOSEDLOOP_PG_URL is not set (no PostgreSQL to test)");
            return None;
        };
        let name = format!("closedloop_cli_{test}_{}", std::process::id());
        sql(
            &admin,
            &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
        )
        .await;
        sql(&admin, &format!("CREATE DATABASE {name}")).await;
        let url = format!("{}/{name}", admin.rsplit_once('/').unwrap().0);
        Some(Database { admin, name, url })
    }

    pub async fn drop(self) {
        let drop = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        sql(&self.admin, &drop).await;
    }
}

/// Runs one statement on the database at `url`.
pub async fn sql(url: &str, statement: &str) {
    let mut c = PgConnection::connect(url).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(statement.to_string()))
        .execute(&mut c)
        .await
        .unwrap();
    c.close().await.unwrap();
}

/// One value of `query` on the database at `url`.
pub async fn scalar(url: &str, query: &str) -> i64 {
    let mut c = PgConnection::connect(url).await.unwrap();
    let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(query.to_string()))
        .fetch_one(&mut c)
        .await
        .unwrap();
    c.close().await.unwrap();
    n
}

/// The journal at `url` after a scenario, checked whole: no command left `accepted` or
/// `running` (every one ended, and nobody supervises a command it cannot see), every command's
/// status on its own timeline, no command with two endings, and none dispatched twice (a write
/// sent once per command, whatever changed hands).
pub async fn assert_consistent(url: &str) {
    let checks = [
        (
            "left open",
            "SELECT count(*) FROM commands WHERE status IN ('accepted', 'running')",
        ),
        (
            "whose status is not on its timeline",
            "SELECT count(*) FROM commands c WHERE NOT EXISTS
             (SELECT 1 FROM events e WHERE e.command_id = c.command_id AND e.event = c.status)",
        ),
        (
            "with two endings",
            "SELECT count(*) FROM (SELECT command_id FROM events WHERE event IN
             ('completed', 'failed', 'timeout', 'sent', 'cancelled', 'rejected')
             GROUP BY command_id HAVING count(*) > 1) twice",
        ),
        (
            "dispatched twice",
            "SELECT count(*) FROM (SELECT command_id FROM events WHERE event = 'dispatched'
             GROUP BY command_id HAVING count(*) > 1) twice",
        ),
    ];
    for (what, query) in checks {
        assert_eq!(scalar(url, query).await, 0, "commands {what}");
    }
}
