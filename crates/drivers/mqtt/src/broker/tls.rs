//! TLS for `mqtts://`: the rustls client config (trusted roots, client certificate) built from
//! the PEM files of a [`BrokerTls`], and the words for a connection that TLS (or the broker)
//! refused.
//!
//! rustls with the `ring` provider, handed to rumqttc ready-made, so no process-wide crypto
//! provider is installed or needed.

use std::path::Path;
use std::sync::Arc;

use rumqttc::v5::ConnectionError;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};

use super::BrokerTls;
use crate::Error;

/// Builds the rustls client config of an `mqtts://` connection: loads `ca_file` (or the
/// system's roots) and the client certificate and key. Every failure names the file and
/// what is wrong with it.
pub(super) fn client_config(config: &BrokerTls) -> Result<ClientConfig, Error> {
    let roots = match &config.ca_file {
        Some(path) => {
            let mut roots = RootCertStore::empty();
            for (i, cert) in load_certs(path, "ca_file")?.into_iter().enumerate() {
                roots.add(cert).map_err(|e| {
                    Error::Tls(format!(
                        "ca_file {}: certificate #{} is not usable as a CA: {e}",
                        path.display(),
                        i + 1
                    ))
                })?;
            }
            roots
        }
        None => system_roots()?,
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Tls(format!("no usable TLS version: {e}")))?
        .with_root_certificates(roots);
    match (&config.client_cert, &config.client_key) {
        (None, None) => Ok(builder.with_no_client_auth()),
        (Some(cert), Some(key)) => {
            let chain = load_certs(cert, "client_cert")?;
            let der = PrivateKeyDer::from_pem_file(key).map_err(|e| {
                Error::Tls(format!(
                    "client_key {}: {}",
                    key.display(),
                    pem_problem(&e, KEY_PEM)
                ))
            })?;
            builder.with_client_auth_cert(chain, der).map_err(|e| {
                Error::Tls(format!(
                    "client_cert {} with client_key {}: {e}; give the key that belongs to \
                     the certificate",
                    cert.display(),
                    key.display()
                ))
            })
        }
        (Some(_), None) => Err(Error::Tls(
            "client_cert is set without client_key; give both (mutual TLS) or neither".into(),
        )),
        (None, Some(_)) => Err(Error::Tls(
            "client_key is set without client_cert; give both (mutual TLS) or neither".into(),
        )),
    }
}

/// Every certificate of a PEM file; at least one.
fn load_certs(path: &Path, key: &str) -> Result<Vec<CertificateDer<'static>>, Error> {
    let fail = |why: String| Error::Tls(format!("{key} {}: {why}", path.display()));
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| fail(pem_problem(&e, CERT_PEM)))?;
    if certs.is_empty() {
        return Err(fail(pem_problem(
            &rustls::pki_types::pem::Error::NoItemsFound,
            CERT_PEM,
        )));
    }
    Ok(certs)
}

/// What a certificate file must hold, for messages.
const CERT_PEM: &str = "no certificate: expected a \"-----BEGIN CERTIFICATE-----\" block";
/// What a key file must hold, for messages.
const KEY_PEM: &str = "no private key: expected a \"-----BEGIN PRIVATE KEY-----\" (PKCS#8), \
                       \"RSA PRIVATE KEY\" (PKCS#1) or \"EC PRIVATE KEY\" (SEC1) block";

/// What is wrong with a PEM file, in words for the person who wrote the plant file; `missing`
/// says what it should have held.
fn pem_problem(e: &rustls::pki_types::pem::Error, missing: &str) -> String {
    use rustls::pki_types::pem::Error as Pem;
    match e {
        Pem::Io(io) => format!("cannot be read: {io}"),
        Pem::NoItemsFound => format!("holds {missing}"),
        Pem::MissingSectionEnd { .. } => {
            "is not valid PEM: a \"-----BEGIN\" line has no matching \"-----END\" line".into()
        }
        Pem::IllegalSectionStart { .. } => {
            "is not valid PEM: a malformed \"-----BEGIN\" line".into()
        }
        Pem::Base64Decode(why) => format!("is not valid PEM: bad base64 inside a block ({why})"),
        other => format!("is not valid PEM: {other}"),
    }
}

/// The system's trusted roots (what `mqtts://` without `ca_file` trusts). Certificates the system
/// store holds but rustls cannot use are skipped; none at all is an error, since no broker could
/// ever be trusted.
fn system_roots() -> Result<RootCertStore, Error> {
    let found = rustls_native_certs::load_native_certs();
    for e in &found.errors {
        tracing::warn!(error = %e, "could not load some of the system's trusted certificates");
    }
    let mut roots = RootCertStore::empty();
    let (added, skipped) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        return Err(Error::Tls(format!(
            "no trusted root certificate found on this system ({skipped} unusable); install the \
             CA certificates (ca-certificates) or set ca_file"
        )));
    }
    Ok(roots)
}

/// The text of a connection error, with what to check when TLS or the broker refused us (or
/// closed us because another client took `client_id`): this is what the logs and
/// [`crate::MqttBroker::last_error`] show as the reason the connection is down.
pub(super) fn explain(e: &ConnectionError, client_id: &str) -> String {
    use rumqttc::v5::StateError;
    use rumqttc::v5::mqttbytes::v5::ConnectReturnCode as Code;
    use rumqttc::v5::mqttbytes::v5::DisconnectReasonCode as Reason;
    if let ConnectionError::MqttState(StateError::ServerDisconnect {
        reason_code: Reason::SessionTakenOver,
        ..
    }) = e
    {
        return format!(
            "the broker closed this connection because another client connected with the same \
             client_id {client_id:?} (MQTT reason 0x8E, session taken over): two gateways or \
             plants share it, and the broker keeps one connection per id; give each its own \
             client_id"
        );
    }
    let hint = match (e, tls_cause(e)) {
        (_, Some(rustls::Error::InvalidCertificate(_))) => {
            "the broker's certificate is not trusted: set ca_file to the CA that signed it, and \
             check that the host in the broker URL is one of its subjectAltNames"
        }
        (_, Some(rustls::Error::AlertReceived(_))) => {
            "the broker refused the TLS handshake: if it requires client certificates, set \
             client_cert and client_key to a certificate it trusts and its key"
        }
        (_, Some(_)) | (ConnectionError::Tls(_), None) => {
            "the TLS handshake failed: check that the broker speaks TLS on this port"
        }
        (
            ConnectionError::ConnectionRefused(Code::BadUserNamePassword | Code::NotAuthorized),
            _,
        ) => "check username and password",
        _ => return e.to_string(),
    };
    format!("{e} ({hint})")
}

/// The rustls error under a connection error, wherever rumqttc wrapped it: in the handshake, or
/// in the first read after it (a TLS 1.3 broker refuses a client certificate only then).
fn tls_cause(e: &ConnectionError) -> Option<&rustls::Error> {
    use rumqttc::v5::mqttbytes::Error as Mqtt;
    use rumqttc::v5::{StateError, TlsError};
    let io = match e {
        ConnectionError::Tls(TlsError::TLS(e)) => return Some(e),
        ConnectionError::Tls(TlsError::Io(io))
        | ConnectionError::Io(io)
        | ConnectionError::MqttState(StateError::Io(io))
        | ConnectionError::MqttState(StateError::Deserialization(Mqtt::Io(io))) => io,
        _ => return None,
    };
    io.get_ref()?.downcast_ref::<rustls::Error>()
}
