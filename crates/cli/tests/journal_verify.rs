//! `closedloop journal verify` against journals `serve` wrote, on SQLite and PostgreSQL: the
//! hash chain covers who asked for what, so an edit of any covered field of a command row
//! (caller, device, action, params, idempotency key, status, error code, verified) or of its
//! confirmation is named with the command and the field, exit 1; the untouched journal is
//! intact, exit 0; and a journal written with the v1 encoding says where the cover starts.

mod common;

use closedloop_journal::Journal;
use closedloop_journal::chain::{GENESIS, event_hash, event_hash_v2};
use common::pg::Database;
use common::{act, connect};
use serde_json::json;
use sqlx::Connection;
use std::path::Path;
use std::process::Command;

/// The journal tests' lamp plant (`common::lamp_plant`), journaled to `journal`.
fn plant(journal: &str) -> String {
    common::lamp_plant("verify", journal)
}

/// What `journal verify` says a command row's check covers, and what it does not.
const COVERED: &str = "(their caller, device, action, params, idempotency key, status, error code and verified; detail, hint, evidence, times, dispatched and readback_matched are not covered: the timeline's events record what they say)";

/// `closedloop journal verify PLANT`: (exit code, stdout).
fn verify(plant: &Path) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_closedloop"))
        .args(["journal", "verify"])
        .arg(plant)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.is_empty() || out.status.code() == Some(1),
        "{stderr}"
    );
    (out.status.code(), stdout)
}

/// The journal's database, as someone with access to it would edit it.
enum Db {
    Sqlite(String),
    Pg(String),
}

impl Db {
    async fn exec(&self, sql: &str) {
        match self {
            Db::Sqlite(url) => {
                let db = sqlx::SqlitePool::connect(url).await.unwrap();
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_string()))
                    .execute(&db)
                    .await
                    .unwrap();
                db.close().await;
            }
            Db::Pg(url) => common::pg::sql(url, sql).await,
        }
    }

    /// One value of `query`, which casts it to text (`CAST(x AS TEXT)` both stores take).
    async fn text(&self, query: &str) -> Option<String> {
        let q = sqlx::AssertSqlSafe(query.to_string());
        match self {
            Db::Sqlite(url) => {
                let db = sqlx::SqlitePool::connect(url).await.unwrap();
                let v = sqlx::query_scalar(q).fetch_one(&db).await.unwrap();
                db.close().await;
                v
            }
            Db::Pg(url) => {
                let mut c = sqlx::postgres::PgConnection::connect(url).await.unwrap();
                let v = sqlx::query_scalar(q).fetch_one(&mut c).await.unwrap();
                c.close().await.unwrap();
                v
            }
        }
    }

    async fn int(&self, query: &str) -> i64 {
        let text = self.text(query).await.expect("a value");
        text.parse().unwrap()
    }
}

/// Serves the plant over stdio and switches the lamp on once, with an idempotency key.
async fn one_command(dir: &Path) {
    let c = connect(dir).await;
    let args = json!({"on": true, "idempotency_key": "key-1"});
    let (status, _, _) = act(&c, "lamp_switch", args).await;
    assert_eq!(status, "completed");
    c.cancel().await.unwrap();
}

/// The edits of the one command's row, `(field, SET clause, SET clause that undoes it)`.
fn edits(params: &str) -> Vec<(&'static str, String, String)> {
    let set = |field, edit: &str, undo: &str| (field, edit.to_string(), undo.to_string());
    vec![
        set("caller", "caller = 'viewer'", "caller = 'stdio'"),
        set("device", "device = 'press'", "device = 'lamp'"),
        set("action", "action = 'stroke'", "action = 'switch'"),
        set(
            "params",
            r#"params = '{"on":false}'"#,
            &format!("params = '{params}'"),
        ),
        set(
            "idempotency_key",
            "idempotency_key = 'key-2'",
            "idempotency_key = 'key-1'",
        ),
        set("status", "status = 'failed'", "status = 'completed'"),
        set("error_code", "error_code = 'TIMEOUT'", "error_code = NULL"),
        set(
            "verified",
            "verified = NOT verified",
            "verified = NOT verified",
        ),
    ]
}

/// Edits each covered field of the journal's one command in turn (and then its `accepted`
/// event), checking verify's exact report and exit code each time.
async fn each_edit_is_named(plant: &Path, db: &Db) {
    let id = db.text("SELECT command_id FROM commands").await.unwrap();
    let n = db.int("SELECT CAST(MAX(seq) AS TEXT) FROM events").await;
    let head = db
        .text(&format!("SELECT hash FROM events WHERE seq = {n}"))
        .await
        .unwrap();
    let at = db
        .int(&format!(
            "SELECT CAST(MAX(seq) AS TEXT) FROM events
             WHERE command_id = '{id}' AND row_digest IS NOT NULL"
        ))
        .await;
    let top = format!("checked {n} chained event(s)\n");
    let tail = format!("head seq {n} hash {head}\n");
    let intact =
        format!("{top}checked 1 command row(s) against the chain {COVERED}\n{tail}intact\n");
    assert_eq!(verify(plant), (Some(0), intact.clone()));
    let params = db.text("SELECT params FROM commands").await.unwrap();
    for (field, edit, undo) in edits(&params) {
        db.exec(&format!("UPDATE commands SET {edit}")).await;
        let broken = format!(
            "{top}checked 0 command row(s) against the chain {COVERED}\n{tail}BROKEN at seq {at} (command {id}): command row changed: field {field} differs from what the chain recorded at seq {at}\n"
        );
        assert_eq!(verify(plant), (Some(1), broken), "{edit}");
        db.exec(&format!("UPDATE commands SET {undo}")).await;
        assert_eq!(verify(plant), (Some(0), intact.clone()), "{undo}");
    }
    an_edited_confirmation_is_named(plant, db, &id).await;
}

/// Someone rewrites who confirmed the command in its `accepted` event: that event is named.
async fn an_edited_confirmation_is_named(plant: &Path, db: &Db, id: &str) {
    let field = |column: &str| {
        format!(
            "SELECT CAST({column} AS TEXT) FROM events WHERE command_id = '{id}' AND event = 'accepted'"
        )
    };
    let seq = db.int(&field("seq")).await;
    assert!(seq > 1, "the command's `received` comes first");
    let at_ms = db.int(&field("at_ms")).await;
    let prev = db.text(&field("prev_hash")).await.unwrap();
    let stored = db.text(&field("hash")).await.unwrap();
    let digest = db.text(&field("row_digest")).await;
    let data = r#"{"confirmed_by":"mallory"}"#;
    db.exec(&format!(
        "UPDATE events SET data = '{data}' WHERE seq = {seq}"
    ))
    .await;
    let again = event_hash_v2(&prev, seq, id, at_ms, "accepted", data, digest.as_deref());
    let good = seq - 1;
    let expected = format!(
        "checked {good} chained event(s)\nlast good seq {good} hash {prev}\nBROKEN at seq {seq} (command {id}): content changed: the row hashes to {again}, not to its stored {stored} (if the plant sets [server] journal_key, verify with it: keyed rows need the key)\n"
    );
    assert_eq!(verify(plant), (Some(1), expected));
}

#[tokio::test]
async fn verify_names_each_edited_field_of_a_command_row_in_a_sqlite_journal() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plant.toml");
    std::fs::write(&file, plant("sqlite://journal.db")).unwrap();
    one_command(dir.path()).await;
    let url = format!("sqlite://{}", dir.path().join("journal.db").display());
    each_edit_is_named(&file, &Db::Sqlite(url)).await;
}

#[tokio::test]
async fn verify_names_each_edited_field_of_a_command_row_on_postgres() {
    let Some(pg) = Database::create("verify_rows").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plant.toml");
    std::fs::write(&file, plant(&pg.url)).unwrap();
    one_command(dir.path()).await;
    each_edit_is_named(&file, &Db::Pg(pg.url.clone())).await;
    pg.drop().await;
}

/// Makes the journal at `url` one an older closedloop wrote: the schema before row digests
/// (the column dropped, its migration forgotten) and `c0` with three events hashed with the
/// v1 encoding. The hash of the last.
async fn v1_journal(url: &str) -> String {
    Journal::open(url).await.unwrap().close().await;
    let mut sql = String::from(
        "ALTER TABLE events DROP COLUMN row_digest;
         DELETE FROM schema_version WHERE version = 5;
         INSERT INTO commands VALUES ('c0', 'r0', 'lamp', 'switch', '{}', 'completed', 0,
            'feedback', NULL, NULL, NULL, '{}', NULL, 1, 1, NULL, 0, 'ops', NULL);",
    );
    let mut prev = GENESIS.to_string();
    for (seq, event) in (1..).zip(["received", "accepted", "completed"]) {
        let hash = event_hash(&prev, seq, "c0", 1, event, "null");
        sql += &format!(
            "INSERT INTO events (seq, command_id, at_ms, event, data, prev_hash, hash)
             VALUES ({seq}, 'c0', 1, '{event}', 'null', '{prev}', '{hash}');"
        );
        prev = hash;
    }
    Db::Sqlite(url.to_string()).exec(&sql).await;
    prev
}

#[tokio::test]
async fn a_journal_written_with_the_v1_encoding_says_where_the_cover_of_rows_starts() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plant.toml");
    std::fs::write(&file, plant("sqlite://journal.db")).unwrap();
    let url = format!("sqlite://{}", dir.path().join("journal.db").display());
    let h3 = v1_journal(&url).await;
    let uncovered = "1 command row(s) not covered: written before the cover started, or their timeline pruned\n";
    assert_eq!(
        verify(&file),
        (
            Some(0),
            format!(
                "checked 3 chained event(s)\nchecked 0 command row(s) against the chain {COVERED}\ncommand rows not covered yet: no event records them; the next one written starts their cover\n{uncovered}head seq 3 hash {h3}\nintact\n"
            )
        )
    );
    // This version's serve migrates the journal and continues the chain with v2 events.
    one_command(dir.path()).await;
    let db = Db::Sqlite(url);
    let n = db.int("SELECT CAST(MAX(seq) AS TEXT) FROM events").await;
    let head = db
        .text(&format!("SELECT hash FROM events WHERE seq = {n}"))
        .await
        .unwrap();
    assert_eq!(
        verify(&file),
        (
            Some(0),
            format!(
                "checked {n} chained event(s)\nchecked 1 command row(s) against the chain {COVERED}\ncommand rows covered from seq 4: the 3 event(s) before it were hashed without them (v1)\n{uncovered}head seq {n} hash {head}\nintact\n"
            )
        )
    );
}

/// `journal verify PLANT --head SEQ:HASH`: (exit code, stdout).
fn verify_against(plant: &Path, head: &str) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_closedloop"))
        .args(["journal", "verify"])
        .arg(plant)
        .args(["--head", head])
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Rehashes events `from..=to` under the public, unkeyed (v2) rule, each linked to the one
/// before: what someone with write access but no key can do.
async fn recompute_unkeyed(db: &Db, from: i64, to: i64) {
    let mut prev = db
        .text(&format!("SELECT prev_hash FROM events WHERE seq = {from}"))
        .await
        .unwrap();
    for s in from..=to {
        let field = |c: &str| format!("SELECT CAST({c} AS TEXT) FROM events WHERE seq = {s}");
        let id = db.text(&field("command_id")).await.unwrap();
        let at = db.int(&field("at_ms")).await;
        let event = db.text(&field("event")).await.unwrap();
        let data = db.text(&field("data")).await.unwrap();
        let digest = db.text(&field("row_digest")).await;
        let hash = event_hash_v2(&prev, s, &id, at, &event, &data, digest.as_deref());
        db.exec(&format!(
            "UPDATE events SET hash = '{hash}', prev_hash = '{prev}' WHERE seq = {s}"
        ))
        .await;
        prev = hash;
    }
}

/// Someone with write access edits who confirmed the command and recomputes every hash after
/// it, as the public chain rule allows: the chain checks out by itself (exit 0), but not against
/// the head a verify printed before and that was kept elsewhere (exit 1) — the documented way to
/// detect a rewritten journal.
async fn a_recomputed_chain_differs_from_a_kept_head(plant: &Path, db: &Db) {
    let n = db.int("SELECT CAST(MAX(seq) AS TEXT) FROM events").await;
    let kept = db
        .text(&format!("SELECT hash FROM events WHERE seq = {n}"))
        .await
        .unwrap();
    let (code, out) = verify(plant);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains(&format!("head seq {n} hash {kept}")), "{out}");
    let seq = db
        .int("SELECT CAST(seq AS TEXT) FROM events WHERE event = 'accepted'")
        .await;
    db.exec(&format!(
        r#"UPDATE events SET data = '{{"confirmed_by":"mallory"}}' WHERE seq = {seq}"#
    ))
    .await;
    recompute_unkeyed(db, seq, n).await;
    let (code, out) = verify(plant);
    assert_eq!(code, Some(0), "the forgery checks out by itself: {out}");
    let (code, out) = verify_against(plant, &format!("{n}:{kept}"));
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("differs from a head kept elsewhere"), "{out}");
    assert!(out.contains("was rewritten"), "{out}");
}

#[tokio::test]
async fn a_rewritten_journal_is_found_against_a_head_kept_elsewhere_on_sqlite_and_postgres() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plant.toml");
    std::fs::write(&file, plant("sqlite://journal.db")).unwrap();
    one_command(dir.path()).await;
    let url = format!("sqlite://{}", dir.path().join("journal.db").display());
    a_recomputed_chain_differs_from_a_kept_head(&file, &Db::Sqlite(url)).await;
    let Some(pg) = Database::create("verify_kept_head").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plant.toml");
    std::fs::write(&file, plant(&pg.url)).unwrap();
    one_command(dir.path()).await;
    a_recomputed_chain_differs_from_a_kept_head(&file, &Db::Pg(pg.url.clone())).await;
    pg.drop().await;
}

/// A plant whose journal is keyed (`[server] journal_key`) served once, then rewritten from
/// the start without the key: `journal verify` names the chain unkeyed, with no head kept
/// anywhere; a plant naming a key whose variable is unset here says verify needs it.
async fn a_keyed_chain_rewritten_without_its_key_is_found(dir: &Path, journal: &str, db: &Db) {
    let file = dir.join("plant.toml");
    let keyed = plant(journal).replace(
        "[server]\n",
        "[server]\njournal_key = \"a-key-of-32-bytes-for-this-plant\"\n",
    );
    std::fs::write(&file, &keyed).unwrap();
    one_command(dir).await;
    let (code, out) = verify(&file);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("keyed with the plant's journal_key from seq 1"),
        "{out}"
    );
    let n = db.int("SELECT CAST(MAX(seq) AS TEXT) FROM events").await;
    db.exec("UPDATE events SET data = '{\"forged\":true}' WHERE seq = 2")
        .await;
    recompute_unkeyed(db, 1, n).await;
    let (code, out) = verify(&file);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains(&format!(
            "BROKEN at seq {n}: not hashed with the journal key"
        )),
        "{out}"
    );
    let unset = keyed.replace(
        "a-key-of-32-bytes-for-this-plant",
        "${env:CLOSEDLOOP_TEST_UNSET_JOURNAL_KEY}",
    );
    std::fs::write(&file, unset).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_closedloop"))
        .args(["journal", "verify"])
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        stderr.contains("verify needs that key")
            && stderr.contains("CLOSEDLOOP_TEST_UNSET_JOURNAL_KEY"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_keyed_journal_rewritten_without_its_key_is_found_on_sqlite_and_postgres() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("journal.db").display());
    a_keyed_chain_rewritten_without_its_key_is_found(
        dir.path(),
        "sqlite://journal.db",
        &Db::Sqlite(url),
    )
    .await;
    let Some(pg) = Database::create("verify_keyed").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    a_keyed_chain_rewritten_without_its_key_is_found(dir.path(), &pg.url, &Db::Pg(pg.url.clone()))
        .await;
    pg.drop().await;
}
