//! `[server]`: name, journal location, tokens, tool mode.

use crate::error::Sink;
use crate::model::{RawServer, RawToken};
use crate::plant::{Secret, Server, Token, TokenScope};
use std::path::Path;

/// The journal when the file names none: next to the plant file.
pub(crate) const DEFAULT_JOURNAL: &str = "sqlite://closedloop.db";
/// How long a device lease lasts when the file does not say (`lease_s`).
const DEFAULT_LEASE_S: f64 = 5.0;

/// How long a confirmation token stays valid when the file says nothing.
pub(crate) const DEFAULT_CONFIRM_TTL_S: f64 = 120.0;
/// How long an action tool waits for a final status when the call does not say (`wait_s`).
pub(crate) const DEFAULT_WAIT_S: f64 = 2.0;

pub(crate) fn server(
    raw: RawServer,
    stem: &str,
    base: &Path,
    device_ids: &[String],
    sink: &mut Sink,
) -> Server {
    let name = raw.name.unwrap_or_else(|| stem.to_string());
    if name.trim().is_empty() {
        sink.push(None, "server.name", "the server name must not be empty");
    }
    let journal =
        journal(raw.journal.as_deref().unwrap_or(DEFAULT_JOURNAL), base).unwrap_or_else(|m| {
            sink.push(None, "server.journal", m);
            String::new()
        });
    let tokens = tokens(raw.token, device_ids, sink);
    let confirm_ttl_s = within(
        raw.confirm_ttl_s.unwrap_or(DEFAULT_CONFIRM_TTL_S),
        &crate::limits::CONFIRM_TTL_S,
        (
            "server.confirm_ttl_s",
            "a confirmation should expire within a day; write a number of seconds in that range, or \
         remove confirm_ttl_s for the default 120",
        ),
        sink,
    );
    let default_wait_s = within(
        raw.default_wait_s.unwrap_or(DEFAULT_WAIT_S),
        &crate::limits::DEFAULT_WAIT_S,
        (
            "server.default_wait_s",
            "an action tool waits at most 10 s for a final status; write a number of seconds in that \
         range, or remove default_wait_s for the default 2",
        ),
        sink,
    );
    let retain = raw.retain.as_deref().and_then(|text| {
        retention(text)
            .map_err(|m| sink.push(None, "server.retain", m))
            .ok()
    });
    let confirm_by = confirmers(raw.confirm_by.unwrap_or_default(), &tokens, sink);
    let lease_s = within(
        raw.lease_s.unwrap_or(DEFAULT_LEASE_S),
        &crate::limits::LEASE_S,
        (
            "server.lease_s",
            "a lease is renewed every third of it; write a number of seconds in that range, or \
         remove lease_s for the default 5",
        ),
        sink,
    );
    let otlp = raw.otlp.as_deref().and_then(|url| {
        otlp_url(url)
            .map_err(|m| sink.push(None, "server.otlp", m))
            .ok()
    });
    let journal_key = raw.journal_key.and_then(|text| {
        journal_key(text)
            .map_err(|m| sink.push(None, "server.journal_key", m))
            .ok()
    });
    Server {
        journal_key,
        name,
        journal,
        confirm_by,
        tokens,
        tools: raw.tools.unwrap_or_default(),
        confirm_ttl_s,
        default_wait_s,
        retain,
        lease_s,
        otlp,
    }
}

/// `[[server.token]]`: each name once, its SHA-256 in hex, its scopes parsed.
fn tokens(raw: Vec<RawToken>, device_ids: &[String], sink: &mut Sink) -> Vec<Token> {
    let mut tokens: Vec<Token> = Vec::new();
    for (i, t) in raw.into_iter().enumerate() {
        let key = format!("server.token[{i}]");
        if tokens.iter().any(|o| o.name == t.name) {
            sink.push(
                None,
                &format!("{key}.name"),
                format!(
                    "the token name \"{}\" is used twice; names tell tokens apart in logs",
                    t.name
                ),
            );
        }
        let sha = t.sha256.to_ascii_lowercase();
        if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
            sink.push(None, &format!("{key}.sha256"), format!(
                "\"{}\" is not a SHA-256 in hex (64 characters 0-9a-f); write the hash of the secret, e.g. the output of `printf %s SECRET | sha256sum`",
                t.sha256
            ));
        }
        let mut scopes = Vec::new();
        for (j, s) in t.scopes.iter().enumerate() {
            match scope(s, device_ids) {
                Ok(sc) => scopes.push(sc),
                Err(m) => sink.push(None, &format!("{key}.scopes[{j}]"), m),
            }
        }
        tokens.push(Token {
            name: t.name,
            sha256: sha,
            scopes,
        });
    }
    tokens
}

/// `value` when `limit` admits it; else the error on `key`, with `advice`, and `value` as given.
fn within(
    value: f64,
    limit: &crate::limits::Limit,
    (key, advice): (&str, &str),
    sink: &mut Sink,
) -> f64 {
    if let Err(m) = limit.check_f64(value, advice) {
        sink.push(None, key, m);
    }
    value
}

/// `journal_key`: at least [`crate::limits::JOURNAL_KEY_MIN_BYTES`] bytes (128 bits).
pub(crate) fn journal_key(text: String) -> Result<Secret, String> {
    let min = crate::limits::JOURNAL_KEY_MIN_BYTES;
    if text.len() < min {
        return Err(format!(
            "the journal key is {} bytes; use at least {min} random bytes from the environment, e.g. journal_key = \"${{env:CLOSEDLOOP_JOURNAL_KEY}}\" with the variable set from `openssl rand -hex 32`",
            text.len()
        ));
    }
    Ok(Secret(text))
}

/// `otlp`: an OTLP/HTTP collector as `http://host[:port][/path]`, without the trailing slash.
fn otlp_url(url: &str) -> Result<String, String> {
    let Some(rest) = url.strip_prefix("http://") else {
        return Err(format!(
            "otlp = {url:?}: write the collector's OTLP/HTTP address as http://host:4318; \
             closedloop sends plain HTTP only (no gRPC, no TLS): use a collector on this host or \
             network, which can forward over TLS"
        ));
    };
    let host = rest.split('/').next().unwrap_or_default();
    let (name, port) = host.rsplit_once(':').unwrap_or((host, "4318"));
    if name.is_empty() || port.parse::<u16>().map_or(true, |p| p == 0) {
        return Err(format!(
            "otlp = {url:?}: give a host and, if not 4318, a port: http://collector:4318"
        ));
    }
    Ok(url.trim_end_matches('/').to_string())
}

/// `confirm_by`: names of declared tokens, each once.
fn confirmers(names: Vec<String>, tokens: &[Token], sink: &mut Sink) -> Vec<String> {
    let declared: Vec<&str> = tokens.iter().map(|t| t.name.as_str()).collect();
    for (i, name) in names.iter().enumerate() {
        let key = format!("server.confirm_by[{i}]");
        if declared.is_empty() {
            sink.push(None, &key, format!(
                "confirm_by names token \"{name}\" but the plant declares no [[server.token]]; \
                 declare the person's token (name, sha256, scopes) and the agent's, or remove confirm_by"
            ));
        } else if !declared.contains(&name.as_str()) {
            sink.push(
                None,
                &key,
                format!(
                    "\"{name}\" names no [[server.token]]; tokens are {}",
                    declared.join(", ")
                ),
            );
        } else if names[..i].contains(name) {
            sink.push(None, &key, format!("\"{name}\" is listed twice"));
        }
    }
    names
}

/// `retain`: a whole number of days or hours (`"30d"`, `"12h"`), at least one hour.
pub(crate) fn retention(text: &str) -> Result<std::time::Duration, String> {
    let wrong = || {
        format!(
            "retain = {text:?} is not a retention; write days or hours like \"30d\" or \"12h\" \
             (at least 1h), or remove retain to keep every command"
        )
    };
    let t = text.trim();
    let (number, hours) = match (t.strip_suffix('d'), t.strip_suffix('h')) {
        (Some(n), _) => (n, 24),
        (_, Some(n)) => (n, 1),
        _ => return Err(wrong()),
    };
    match number.trim().parse::<u64>() {
        Ok(n) if n >= 1 => Ok(std::time::Duration::from_secs(n * hours * 3600)),
        _ => Err(wrong()),
    }
}

fn scope(s: &str, device_ids: &[String]) -> Result<TokenScope, String> {
    match s {
        "read" => Ok(TokenScope::Read),
        "admin" => Ok(TokenScope::Admin),
        "actuate:*" => Ok(TokenScope::ActuateAll),
        _ => match s.strip_prefix("actuate:") {
            Some(d) if device_ids.iter().any(|i| i == d) => Ok(TokenScope::Actuate(d.to_string())),
            Some(d) => Err(format!(
                "\"{s}\" names no device \"{d}\"; devices are {}",
                device_ids.join(", ")
            )),
            None => Err(format!(
                "\"{s}\" is not a scope; write read, admin, actuate:* or actuate:<device>"
            )),
        },
    }
}

/// Resolves the journal URL: SQLite paths become absolute (relative to the plant file); a
/// PostgreSQL URL must name a host and a database, and is kept as written (its password
/// usually comes from `${env:...}`, already replaced here).
pub(crate) fn journal(url: &str, base: &Path) -> Result<String, String> {
    if let Some(rest) = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))
    {
        let (authority, database) = rest.split_once('/').unwrap_or((rest, ""));
        let host = authority.rsplit('@').next().unwrap_or("");
        if host.is_empty() || database.split('?').next().unwrap_or("").is_empty() {
            return Err("a PostgreSQL journal names a host and a database, e.g. journal = \"postgres://closedloop:${env:PGPASSWORD}@db.example:5432/plant\"".into());
        }
        return Ok(url.to_string());
    }
    if url == "sqlite::memory:" || url == "sqlite://:memory:" {
        return Ok("sqlite::memory:".into());
    }
    let Some(rest) = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
    else {
        return Err(format!(
            "\"{url}\" is not a journal URL; write sqlite://<file> (relative to the plant file), postgres://USER@HOST:PORT/DATABASE, or sqlite::memory:"
        ));
    };
    let (path, query) = match rest.split_once('?') {
        Some((p, q)) => (p, format!("?{q}")),
        None => (rest, String::new()),
    };
    if path.is_empty() {
        return Err("the journal URL names no file; write e.g. sqlite://closedloop.db".into());
    }
    let abs = base.join(path);
    Ok(format!("sqlite://{}{query}", abs.display()))
}

#[cfg(test)]
mod tests {
    use super::journal;
    use std::path::Path;

    #[test]
    fn journal_paths_resolve_next_to_the_plant_file() {
        let base = Path::new("/srv/plant");
        assert_eq!(
            journal("sqlite://closedloop.db", base).unwrap(),
            "sqlite:///srv/plant/closedloop.db"
        );
        assert_eq!(
            journal("sqlite:///var/j.db?mode=rwc", base).unwrap(),
            "sqlite:///var/j.db?mode=rwc"
        );
        assert_eq!(
            journal("sqlite:data/j.db", base).unwrap(),
            "sqlite:///srv/plant/data/j.db"
        );
        assert_eq!(journal("sqlite::memory:", base).unwrap(), "sqlite::memory:");
        assert_eq!(
            journal("postgres://gw@db:5432/plant", base).unwrap(),
            "postgres://gw@db:5432/plant"
        );
        assert!(
            journal("postgres://db", base)
                .unwrap_err()
                .contains("names a host and a database")
        );
        assert!(
            journal("mysql://x", base)
                .unwrap_err()
                .contains("sqlite://")
        );
    }
}
