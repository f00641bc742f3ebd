//! The `[server]` table: the gateway's name, journal, tool mode and HTTP tokens.

use std::fmt;

/// The `[server]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct Server {
    /// The server's name, reported to MCP clients. Default: the plant file's stem.
    pub name: String,
    /// `sqlite://<absolute path>`, `postgres://…` or `sqlite::memory:`.
    pub journal: String,
    /// Bearer tokens for HTTP.
    pub tokens: Vec<Token>,
    /// How actions become MCP tools.
    pub tools: ToolMode,
    /// How long a confirmation token of a `confirm = true` action stays valid. Default 120 s.
    pub confirm_ttl_s: f64,
    /// How long an action tool waits for a final status when the call gives no `wait_s`:
    /// a fast action completes in one call, a slow one still answers `accepted` quickly.
    /// Default 2 s, at most 10.
    pub default_wait_s: f64,
    /// How long finished commands stay in the journal (`retain = "30d"`): `serve` deletes
    /// older ones, with their timelines, at start and every hour. `None` (the default): kept
    /// for good.
    pub retain: Option<std::time::Duration>,
    /// Token names whose holders confirm `confirm = true` actions for others
    /// (`confirm_by = ["operator"]`). Empty (the default): the caller that asked confirms, after
    /// asking its user. Set: over HTTP a confirmation is redeemed only by `confirm_command` from
    /// one of these tokens, never by the token that asked, so an agent cannot confirm itself.
    pub confirm_by: Vec<String>,
    /// How long a device lease lasts when several gateways share a PostgreSQL journal
    /// (`lease_s`, default 5 s): the owner renews it every third of that, and a dead owner's
    /// devices go to another gateway once it expires.
    pub lease_s: f64,
    /// Where to send a trace span per command (`otlp = "http://collector:4318"`, OTLP/HTTP with
    /// protobuf): `http://host[:port][/path]`, the port 4318 when not given. `None` (the
    /// default): no traces.
    pub otlp: Option<String>,
    /// The key the journal's hash chain is keyed with (`journal_key = "${env:NAME}"`, at least
    /// 16 bytes): events are hashed with HMAC-SHA256 under it, so someone who can rewrite the
    /// journal but not read the key cannot forge a chain `journal verify` accepts. `None` (the
    /// default): an unkeyed chain.
    pub journal_key: Option<Secret>,
}

/// How actions become MCP tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolMode {
    /// One tool per action, `{device}_{action}` (the default).
    #[default]
    PerAction,
    /// One generic tool taking device, action and params, for plants with very many actions.
    Generic,
}

/// A bearer token of the HTTP transport. Only the hash of the secret is in the file.
#[derive(Clone, PartialEq)]
pub struct Token {
    /// Who holds it, for logs.
    pub name: String,
    /// Lower-case hex SHA-256 of the secret (64 characters).
    pub sha256: String,
    /// What it allows.
    pub scopes: Vec<TokenScope>,
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token")
            .field("name", &self.name)
            .field("scopes", &self.scopes)
            .finish()
    }
}

/// One scope of a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenScope {
    /// Read state, commands, resources.
    Read,
    /// Run actions of one device.
    Actuate(String),
    /// Run actions of every device (`actuate:*`).
    ActuateAll,
    /// Everything, including raw access.
    Admin,
}

impl TokenScope {
    /// Whether this scope lets its holder run actions of `device`.
    pub fn allows_actuate(&self, device: &str) -> bool {
        match self {
            TokenScope::Admin | TokenScope::ActuateAll => true,
            TokenScope::Actuate(d) => d == device,
            TokenScope::Read => false,
        }
    }
}

/// A password or similar secret: kept out of `Debug` output, so logs never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}
