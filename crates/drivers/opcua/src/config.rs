//! How to reach one OPC UA server: the plant file's
//! `{ kind = "opcua", endpoint = "opc.tcp://host:4840/path", security = "none" }` (and its
//! `username` / `password`) as typed options.
//!
//! Validation ([`OpcuaConfig::validate`]) does no network I/O; it checks the URL and that every
//! file it names can be read, so a typo in a certificate path is a configuration error at start-up
//! and never looks like a dead server.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::Error;

/// Default time a request may take before it fails `Bad_Timeout`.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// Connection settings for one endpoint; one session is kept per [`crate::OpcuaClient`].
#[derive(Debug, Clone)]
pub struct OpcuaConfig {
    /// `opc.tcp://host:port[/path]`.
    pub endpoint: String,
    /// Message security; [`Security::None`] for tests and closed networks.
    pub security: Security,
    /// Who the session logs in as; [`Identity::Anonymous`] unless the server wants a user.
    pub identity: Identity,
    /// Longest wait for any one request (read, write, call, browse) before it fails
    /// `Bad_Timeout` — a zombie server (socket open, nothing answered) is found this way.
    pub request_timeout: Duration,
    /// How often the session is checked with a read of the server's state.
    pub keep_alive: Duration,
    /// Consecutive failed keep-alives after which the session is dropped and re-made; a silent
    /// server is declared lost after about `keep_alive + max_failed_keep_alives × request_timeout`.
    pub max_failed_keep_alives: u64,
    /// First wait between reconnect attempts; doubles up to `max_backoff`.
    pub initial_backoff: Duration,
    /// Longest wait between reconnect attempts.
    pub max_backoff: Duration,
    /// Updates buffered per [`crate::Monitor`]; on overflow the oldest are dropped and counted
    /// in [`crate::Monitor::lagged`], the connection is never slowed down.
    pub buffer: usize,
    /// The application name the server sees (and in a generated client certificate).
    pub application_name: String,
    /// The application URI; must match the client certificate's URI when one is given.
    pub application_uri: String,
}

impl OpcuaConfig {
    /// Settings with defaults: no security, requests time out after 2 s, a keep-alive every
    /// second (3 failures drop the session), reconnects from 100 ms backing off to 5 s, 256
    /// buffered updates per monitor.
    pub fn new(endpoint: impl Into<String>) -> OpcuaConfig {
        OpcuaConfig {
            endpoint: endpoint.into(),
            security: Security::None,
            identity: Identity::Anonymous,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            keep_alive: Duration::from_secs(1),
            max_failed_keep_alives: 3,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            buffer: 256,
            application_name: "closedloop".to_string(),
            application_uri: "urn:closedloop:client".to_string(),
        }
    }

    /// Checks the settings without any network I/O: the URL's scheme and host, positive
    /// durations, and (for Basic256Sha256) that the pinned server certificate and any given
    /// client certificate/key can be read.
    pub fn validate(&self) -> Result<(), Error> {
        let url = self.endpoint.as_str();
        let Some(rest) = url.strip_prefix("opc.tcp://") else {
            return Err(Error::Config(format!(
                "endpoint \"{url}\" must start with opc.tcp:// (e.g. opc.tcp://plc.local:4840/path)"
            )));
        };
        let authority = rest.split('/').next().unwrap_or_default();
        if authority.is_empty() || authority.starts_with(':') {
            return Err(Error::Config(format!(
                "endpoint \"{url}\" names no host (e.g. opc.tcp://plc.local:4840)"
            )));
        }
        if self.request_timeout.is_zero() || self.keep_alive.is_zero() {
            return Err(Error::Config(
                "request_timeout and keep_alive must be greater than zero".to_string(),
            ));
        }
        if self.buffer == 0 {
            return Err(Error::Config("buffer must be at least 1".to_string()));
        }
        if let Identity::UserName { user, .. } = &self.identity
            && user.is_empty()
        {
            return Err(Error::Config(
                "username must not be empty; give the user the server knows, or remove username \
                 and password for an anonymous session"
                    .to_string(),
            ));
        }
        if let Security::Basic256Sha256 {
            server_cert,
            client_cert,
            client_key,
            ..
        } = &self.security
        {
            readable("server_cert", server_cert)?;
            match (client_cert, client_key) {
                (Some(cert), Some(key)) => {
                    readable("client_cert", cert)?;
                    readable("client_key", key)?;
                }
                (None, None) => {}
                _ => {
                    return Err(Error::Config(
                        "client_cert and client_key go together: give both or neither (neither: \
                         a certificate is generated in pki_dir)"
                            .to_string(),
                    ));
                }
            }
        }
        Ok(())
    }
}

fn readable(key: &str, path: &std::path::Path) -> Result<(), Error> {
    std::fs::metadata(path)
        .map(|_| ())
        .map_err(|e| Error::Config(format!("{key} \"{}\" cannot be read: {e}", path.display())))
}

/// Message security of the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Security {
    /// No signing, no encryption (`security = "none"`).
    None,
    /// `security = "basic256sha256"`: signed (and optionally encrypted) messages, the server
    /// authenticated by a certificate pinned from a file.
    Basic256Sha256 {
        /// `mode = "sign"` or `"sign_and_encrypt"`.
        mode: SecurityMode,
        /// `server_cert`: the server's certificate (DER). It is the only one accepted: the
        /// secure channel is encrypted to it and the session must present exactly it, so a
        /// server with any other certificate never gets a session (the session state says
        /// why, e.g. `Bad_NoValidCertificates`), whatever authority signed it.
        server_cert: PathBuf,
        /// `client_cert` (DER); with `client_key`. Neither: generated once in `pki_dir`.
        client_cert: Option<PathBuf>,
        /// `client_key` (PEM) of `client_cert`.
        client_key: Option<PathBuf>,
        /// Where a generated client certificate (`own/cert.der`) and key (`private/private.pem`)
        /// are kept, so the server's operator trusts it once and it survives restarts.
        pki_dir: PathBuf,
    },
}

/// Who the session logs in as (ActivateSession's user identity token).
///
/// `Debug` shows the user name but never the password, so a configuration that ends up in a log
/// line or an error message keeps the secret.
#[derive(Clone, PartialEq, Eq, Default)]
pub enum Identity {
    /// No user: the server's anonymous token.
    #[default]
    Anonymous,
    /// A user name and password (`username` / `password` in the plant file). The password is
    /// encrypted for the server when its user-token policy or the secure channel asks for it;
    /// with `security = "none"` and a server that asks for nothing it travels in clear.
    UserName {
        /// The user name.
        user: String,
        /// The password.
        password: String,
    },
}

impl Identity {
    /// How the identity is named in reasons a person reads: `anonymous`, `user "alice"`.
    pub fn describe(&self) -> String {
        match self {
            Identity::Anonymous => "anonymous".to_string(),
            Identity::UserName { user, .. } => format!("user \"{user}\""),
        }
    }
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Identity::Anonymous => f.write_str("Anonymous"),
            Identity::UserName { user, .. } => f
                .debug_struct("UserName")
                .field("user", user)
                .field("password", &"***")
                .finish(),
        }
    }
}

/// Whether Basic256Sha256 messages are only signed or also encrypted (the plant file's
/// `security`, parsed by the plant loader as `closedloop_contract::OpcuaSecurity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityMode {
    /// Signed, readable on the wire.
    Sign,
    /// Signed and encrypted.
    SignAndEncrypt,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_without_scheme_or_host_are_refused_by_name() {
        let mut cfg = OpcuaConfig::new("opc.tcp://127.0.0.1:4840/x");
        assert_eq!(cfg.validate(), Ok(()));
        cfg.endpoint = "tcp://127.0.0.1:4840".into();
        assert!(
            cfg.validate()
                .unwrap_err()
                .to_string()
                .contains("opc.tcp://")
        );
        cfg.endpoint = "opc.tcp://:4840".into();
        assert!(cfg.validate().unwrap_err().to_string().contains("no host"));
    }

    #[test]
    fn a_missing_pinned_certificate_is_a_configuration_error() {
        let mut cfg = OpcuaConfig::new("opc.tcp://127.0.0.1:4840");
        cfg.security = Security::Basic256Sha256 {
            mode: SecurityMode::Sign,
            server_cert: "/nonexistent/server.der".into(),
            client_cert: None,
            client_key: None,
            pki_dir: std::env::temp_dir(),
        };
        let err = cfg.validate().unwrap_err();
        assert!(err.to_string().contains("server_cert"), "{err}");
        assert_eq!(crate::classify(&err), crate::Class::RegisterInvalid);
    }

    #[test]
    fn the_password_never_shows_in_debug_output() {
        let mut cfg = OpcuaConfig::new("opc.tcp://127.0.0.1:4840");
        cfg.identity = Identity::UserName {
            user: "alice".into(),
            password: "hunter2-secret".into(),
        };
        let shown = format!("{cfg:?} {cfg:#?}");
        assert!(!shown.contains("hunter2-secret"), "{shown}");
        assert!(shown.contains("alice") && shown.contains("***"), "{shown}");
        assert_eq!(cfg.validate(), Ok(()));
        assert_eq!(cfg.identity.describe(), "user \"alice\"");
    }

    #[test]
    fn an_empty_user_name_is_a_configuration_error() {
        let mut cfg = OpcuaConfig::new("opc.tcp://127.0.0.1:4840");
        cfg.identity = Identity::UserName {
            user: String::new(),
            password: "pw".into(),
        };
        let err = cfg.validate().unwrap_err();
        assert!(err.to_string().contains("username"), "{err}");
    }
}
