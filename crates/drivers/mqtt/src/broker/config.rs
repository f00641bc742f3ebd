//! What [`MqttBroker::connect`](super::MqttBroker::connect) needs to know: where the broker is,
//! who to be on it, the last will, and (for `mqtts://`) the TLS files; and how that becomes
//! rumqttc's [`MqttOptions`].
//!
//! Kept apart from the connection itself because the engine builds and compares these values
//! long before any connection exists.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rumqttc::v5::MqttOptions;
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::mqttbytes::v5::LastWill;
use rumqttc::{TlsConfiguration, Transport};

use super::tls;
use crate::Error;
use crate::codec::parse_broker;

/// How to reach a broker.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// `mqtt://host[:port]` (plain) or `mqtts://host[:port]` (TLS); see
    /// [`crate::parse_broker_url`].
    pub url: String,
    /// MQTT client id; the broker drops an older connection with the same id.
    pub client_id: String,
    /// User name, if the broker wants one.
    pub username: Option<String>,
    /// Password, if the broker wants one.
    pub password: Option<String>,
    /// Last will the broker publishes when this connection dies without a DISCONNECT.
    pub will: Option<Will>,
    /// MQTT keep-alive; a dead broker is noticed within ~1.5× this.
    pub keep_alive: Duration,
    /// Requests (publishes, subscribes) queued towards the broker; beyond it `publish` is
    /// [`Error::Busy`](crate::Error::Busy) rather than waiting.
    pub capacity: usize,
    /// `mqtts://` only: whom to trust and who to be. Boxed because most brokers are plain and
    /// the config travels by value inside larger enums (the engine's connections).
    pub tls: Box<BrokerTls>,
}

/// The TLS files of an `mqtts://` connection (PEM); all empty means the system's trusted roots
/// and no client certificate. Read by [`MqttBroker::connect`](super::MqttBroker::connect), which
/// refuses them on a plain URL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrokerTls {
    /// The CA certificate(s) to trust *instead of* the system's roots — for a self-signed
    /// broker or a private CA. `None`: the system's roots.
    pub ca_file: Option<PathBuf>,
    /// A certificate chain presented to a broker that asks for client certificates (mutual
    /// TLS). Goes with `client_key`: both or neither.
    pub client_cert: Option<PathBuf>,
    /// The private key (PKCS#8, PKCS#1 or SEC1) of `client_cert`.
    pub client_key: Option<PathBuf>,
}

impl BrokerTls {
    /// The first file set, by its plant key (for "only with `mqtts://`").
    pub(super) fn first_set(&self) -> Option<&'static str> {
        [
            ("ca_file", &self.ca_file),
            ("client_cert", &self.client_cert),
            ("client_key", &self.client_key),
        ]
        .into_iter()
        .find_map(|(key, v)| v.as_ref().map(|_| key))
    }
}

impl BrokerConfig {
    /// A config with defaults: no credentials, no will, keep-alive 5 s, capacity 64; with
    /// `mqtts://`, the system's trusted roots and no client certificate.
    pub fn new(url: impl Into<String>, client_id: impl Into<String>) -> BrokerConfig {
        BrokerConfig {
            url: url.into(),
            client_id: client_id.into(),
            username: None,
            password: None,
            will: None,
            keep_alive: Duration::from_secs(5),
            capacity: 64,
            tls: Box::default(),
        }
    }
}

/// A last will (QoS 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Will {
    /// Where the broker publishes it.
    pub topic: String,
    /// What it publishes (`offline`).
    pub payload: String,
    /// Whether it is retained (a status topic's will is).
    pub retain: bool,
}

/// The rumqttc options for `config`: address, keep-alive, clean start, TLS (files read here),
/// credentials and last will. TLS files on a plain `mqtt://` URL are refused rather than
/// silently ignored.
pub(super) fn mqtt_options(config: &BrokerConfig) -> Result<MqttOptions, Error> {
    let addr = parse_broker(&config.url)?;
    let mut options = MqttOptions::new(config.client_id.clone(), addr.host, addr.port);
    options
        .set_keep_alive(config.keep_alive)
        .set_clean_start(true);
    if addr.tls {
        let tls = TlsConfiguration::Rustls(Arc::new(tls::client_config(&config.tls)?));
        options.set_transport(Transport::tls_with_config(tls));
    } else if let Some(key) = config.tls.first_set() {
        return Err(Error::Tls(format!(
            "{key} is set but the broker {} is plain MQTT; write it as mqtts://",
            config.url
        )));
    }
    if let Some(user) = &config.username {
        options.set_credentials(user.clone(), config.password.clone().unwrap_or_default());
    }
    if let Some(w) = &config.will {
        options.set_last_will(LastWill::new(
            w.topic.clone(),
            w.payload.clone().into_bytes(),
            QoS::AtLeastOnce,
            w.retain,
            None,
        ));
    }
    Ok(options)
}
