//! Schema migrations, applied in order inside one transaction each.
//!
//! Kept as plain SQL strings (rather than sqlx's macro migrator) so the journal builds without
//! sqlx's macro tree; `schema_version` records the last one applied.

/// `(version, sql)` in ascending order. Never edit an applied migration; append a new one.
pub(crate) const MIGRATIONS: &[(i64, &str)] = &[
    (
        1,
        r#"
CREATE TABLE commands (
    command_id      TEXT PRIMARY KEY NOT NULL,
    request_id      TEXT NOT NULL,
    device          TEXT NOT NULL,
    action          TEXT NOT NULL,
    params          TEXT NOT NULL,
    status          TEXT NOT NULL,
    verified        INTEGER NOT NULL,
    verification    TEXT NOT NULL,
    error_code      TEXT,
    detail          TEXT,
    hint            TEXT,
    evidence        TEXT NOT NULL,
    readback_matched INTEGER,
    accepted_at_ms  INTEGER NOT NULL,
    updated_at_ms   INTEGER NOT NULL,
    deadline_ms     INTEGER,
    dispatched      INTEGER NOT NULL,
    caller          TEXT,
    idempotency_key TEXT
);
CREATE INDEX commands_by_device ON commands (device, accepted_at_ms);
CREATE INDEX commands_by_status ON commands (status);
CREATE INDEX commands_by_key ON commands (idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE TABLE events (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    command_id  TEXT NOT NULL REFERENCES commands (command_id),
    at_ms       INTEGER NOT NULL,
    event       TEXT NOT NULL,
    data        TEXT NOT NULL
);
CREATE INDEX events_by_command ON events (command_id, seq);
"#,
    ),
    (
        2,
        // One command per idempotency key, enforced by the database as well as by the engine.
        "CREATE UNIQUE INDEX commands_one_per_key ON commands (idempotency_key) WHERE idempotency_key IS NOT NULL;",
    ),
    (
        3,
        // The hash chain over `events` (crate::chain): rows written before this migration keep
        // NULL hashes and form the legacy prefix `Journal::verify` counts but cannot check.
        // `chain_anchor` (one row at most) is where the chain resumes after a prune deleted its
        // oldest rows; the index serves `closedloop audit` (commands accepted since T).
        r#"
ALTER TABLE events ADD COLUMN hash TEXT;
ALTER TABLE events ADD COLUMN prev_hash TEXT;
CREATE TABLE chain_anchor (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    seq         INTEGER NOT NULL,
    prev_hash   TEXT
);
CREATE INDEX commands_by_accepted ON commands (accepted_at_ms, command_id);
"#,
    ),
    (
        4,
        // Standing alarms raised and cleared, with the evidence that decided (crate::AlarmRow).
        r#"
CREATE TABLE alarm_events (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT NOT NULL,
    at_ms       INTEGER NOT NULL,
    active      INTEGER NOT NULL,
    evidence    TEXT NOT NULL
);
CREATE INDEX alarm_events_by_time ON alarm_events (at_ms);
"#,
    ),
    (
        5,
        // The chain covers command rows (crate::chain::row): the last event of each write that
        // sets a command's row carries the row's digest, which its v2 hash covers. Events
        // written before this migration keep NULL here and their v1 hashes.
        "ALTER TABLE events ADD COLUMN row_digest TEXT;",
    ),
];

/// The PostgreSQL schema, `(version, sql)` like [`MIGRATIONS`]. Version 3 is the SQLite
/// schema's version 3 (commands, chained events, the prune anchor) in one step, in PostgreSQL's
/// own types, plus `chain_head`: the newest `seq` and hash, which every write transaction locks
/// and moves, so writers on several machines extend one chain in turn. Version 4 adds the
/// instances and device leases of scale-out.
pub(crate) const PG_MIGRATIONS: &[(i64, &str)] = &[
    (
        3,
        r#"
CREATE TABLE commands (
    command_id      TEXT PRIMARY KEY NOT NULL,
    request_id      TEXT NOT NULL,
    device          TEXT NOT NULL,
    action          TEXT NOT NULL,
    params          TEXT NOT NULL,
    status          TEXT NOT NULL,
    verified        BOOLEAN NOT NULL,
    verification    TEXT NOT NULL,
    error_code      TEXT,
    detail          TEXT,
    hint            TEXT,
    evidence        TEXT NOT NULL,
    readback_matched BOOLEAN,
    accepted_at_ms  BIGINT NOT NULL,
    updated_at_ms   BIGINT NOT NULL,
    deadline_ms     BIGINT,
    dispatched      BOOLEAN NOT NULL,
    caller          TEXT,
    idempotency_key TEXT
);
CREATE INDEX commands_by_device ON commands (device, accepted_at_ms);
CREATE INDEX commands_by_status ON commands (status);
CREATE UNIQUE INDEX commands_one_per_key ON commands (idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX commands_by_accepted ON commands (accepted_at_ms, command_id);
CREATE TABLE events (
    seq         BIGINT PRIMARY KEY,
    command_id  TEXT NOT NULL REFERENCES commands (command_id),
    at_ms       BIGINT NOT NULL,
    event       TEXT NOT NULL,
    data        TEXT NOT NULL,
    hash        TEXT,
    prev_hash   TEXT
);
CREATE INDEX events_by_command ON events (command_id, seq);
CREATE TABLE chain_anchor (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    seq         BIGINT NOT NULL,
    prev_hash   TEXT
);
CREATE TABLE chain_head (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    seq         BIGINT NOT NULL,
    hash        TEXT NOT NULL
);
INSERT INTO chain_head (id, seq, hash)
    VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');
"#,
    ),
    (
        4,
        // Scale-out: the instances (gateways) sharing this journal, each seen at its last
        // heartbeat, and one lease per device with its owner, epoch and expiry, all on the
        // database's clock (crate::Leases).
        r#"
CREATE TABLE instances (
    name        TEXT PRIMARY KEY NOT NULL,
    seen_at     TIMESTAMPTZ NOT NULL
);
CREATE TABLE leases (
    device      TEXT PRIMARY KEY NOT NULL,
    owner       TEXT NOT NULL,
    epoch       BIGINT NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL
);
"#,
    ),
    (
        5,
        // Standing alarms raised and cleared, as in the SQLite schema's version 4.
        r#"
CREATE TABLE alarm_events (
    seq         BIGSERIAL PRIMARY KEY,
    name        TEXT NOT NULL,
    at_ms       BIGINT NOT NULL,
    active      BOOLEAN NOT NULL,
    evidence    TEXT NOT NULL
);
CREATE INDEX alarm_events_by_time ON alarm_events (at_ms);
"#,
    ),
    (
        6,
        // Scale-out: every insert of a command and every change of its state is announced on
        // the channel `closedloop_commands` (pg/feed.rs), so gateways hear of the commands the
        // others accept and end. Timeline appends alone announce nothing.
        r#"
CREATE FUNCTION closedloop_announce() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.status <> OLD.status OR NEW.dispatched <> OLD.dispatched THEN
        PERFORM pg_notify('closedloop_commands', json_build_object(
            'command_id', NEW.command_id, 'device', NEW.device,
            'status', NEW.status, 'dispatched', NEW.dispatched)::text);
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER commands_announce AFTER INSERT OR UPDATE ON commands
    FOR EACH ROW EXECUTE FUNCTION closedloop_announce();
"#,
    ),
    (
        7,
        // Confirmations waiting for a person's answer, shared by the gateways
        // (pg/confirmations.rs): the token only as its SHA-256, times on the database's clock.
        r#"
CREATE TABLE confirmations (
    token_sha256    TEXT PRIMARY KEY NOT NULL,
    command_id      TEXT NOT NULL UNIQUE,
    device          TEXT NOT NULL,
    action          TEXT NOT NULL,
    args            TEXT NOT NULL,
    caller          TEXT NOT NULL,
    idempotency_key TEXT,
    issued_at       TIMESTAMPTZ NOT NULL,
    expires_at      TIMESTAMPTZ NOT NULL,
    used_by         TEXT,
    used_at         TIMESTAMPTZ
);
CREATE INDEX confirmations_by_caller ON confirmations (caller, issued_at);
"#,
    ),
    (
        8,
        // Device values the owning gateway publishes for the others (pg/device_values.rs),
        // and when each gateway last confirmed its published values current.
        r#"
CREATE TABLE device_values (
    device      TEXT PRIMARY KEY NOT NULL,
    owner       TEXT NOT NULL,
    epoch       BIGINT NOT NULL,
    state       TEXT NOT NULL,
    changed_at  TIMESTAMPTZ NOT NULL
);
ALTER TABLE instances ADD COLUMN published_at TIMESTAMPTZ;
"#,
    ),
    (
        9,
        // When each command row was inserted, on the database's clock: a gateway taking over a
        // command another accepted counts its queue wait on this one clock, not on two
        // gateways' (`Journal::waited_ms`).
        r#"
ALTER TABLE commands ADD COLUMN inserted_at TIMESTAMPTZ NOT NULL DEFAULT now();
UPDATE commands SET inserted_at = to_timestamp(accepted_at_ms / 1000.0);
"#,
    ),
    (
        10,
        // The checklist items of a waiting confirmation the person already answered yes
        // (pg/confirmations.rs `check_off`): a Tasks client answers them one at a time, maybe
        // through different gateways.
        r#"
ALTER TABLE confirmations ADD COLUMN checked TEXT[] NOT NULL DEFAULT '{}';
"#,
    ),
    (
        11,
        // The chain covers command rows, as in the SQLite schema's version 5.
        "ALTER TABLE events ADD COLUMN row_digest TEXT;",
    ),
];
