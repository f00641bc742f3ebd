//! `closedloop init --mqtt`: listens to a broker for Home Assistant discovery messages (the
//! retained configs under `<prefix>/#`, and any published while it listens), through the MQTT
//! driver's own client, then maps them (`ha.rs`) and renders the plant (`ha_render.rs`).

use super::discovery::{Entity, read};
use closedloop_mqtt::{BrokerConfig, Connection, MqttBroker};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// The broker side of `init --mqtt`.
pub struct Source<'a> {
    /// `mqtt://host[:port]` or `mqtts://…`.
    pub url: &'a str,
    /// The discovery prefix (`homeassistant`).
    pub prefix: &'a str,
    /// How long to listen once connected.
    pub listen: Duration,
    pub username: Option<&'a str>,
    pub password: Option<&'a str>,
    pub ca_file: Option<&'a Path>,
    /// A client certificate and its key, for mutual TLS.
    pub client_cert: Option<&'a Path>,
    pub client_key: Option<&'a Path>,
}

/// How long to wait for the broker's CONNACK.
const CONNECT_WITHIN: Duration = Duration::from_secs(10);

/// The discovery configs on the broker, one per config topic (the last one heard), with the
/// messages that were not configs said as skipped.
pub fn discover(src: &Source) -> Result<(Vec<Entity>, Vec<String>), String> {
    let messages = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("closedloop init: cannot start a runtime: {e}"))?
        .block_on(listen(src))?;
    let mut entities = Vec::new();
    let mut skipped = Vec::new();
    for (topic, payload) in messages {
        match read(src.prefix, &topic, &payload) {
            Ok(Some(e)) => entities.push(e),
            Ok(None) => {}
            Err(why) => skipped.push(why),
        }
    }
    Ok((entities, skipped))
}

async fn listen(src: &Source<'_>) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let mut config = BrokerConfig::new(
        src.url.to_string(),
        format!("closedloop-init-{}", std::process::id()),
    );
    config.username = src.username.map(str::to_string);
    config.password = src.password.map(str::to_string);
    config.tls.ca_file = src.ca_file.map(Path::to_path_buf);
    config.tls.client_cert = src.client_cert.map(Path::to_path_buf);
    config.tls.client_key = src.client_key.map(Path::to_path_buf);
    let broker = MqttBroker::connect(config).map_err(|e| format!("{}: {e}", src.url))?;
    let mut sub = broker.subscribe(&format!("{}/#", src.prefix));
    if let Err(why) = connected(&broker).await {
        return Err(format!(
            "{}: could not connect ({why}); check the URL, and --username with MQTT_PASSWORD, or --ca-file, if the broker wants them",
            src.url
        ));
    }
    let mut out = BTreeMap::new();
    let until = tokio::time::Instant::now() + src.listen;
    while let Ok(Some(m)) = tokio::time::timeout_at(until, sub.recv()).await {
        out.insert(m.topic, m.payload.to_vec());
    }
    broker.abort();
    Ok(out)
}

/// Waits for the broker's CONNACK; the first failed attempt, or none within
/// [`CONNECT_WITHIN`], is the answer (the client would go on retrying).
async fn connected(broker: &MqttBroker) -> Result<(), String> {
    let connection = broker.connection();
    let until = tokio::time::Instant::now() + CONNECT_WITHIN;
    while tokio::time::Instant::now() < until {
        if *connection.borrow() == Connection::Connected {
            return Ok(());
        }
        if let Some(why) = broker.last_error() {
            return Err(why);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(format!("no answer within {} s", CONNECT_WITHIN.as_secs()))
}

/// A `--listen` value: `5s`, `500ms`, `1m` or a number of seconds.
pub fn duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else {
        (t, 1.0)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v * scale <= 600.0 => Ok(Duration::from_secs_f64(v * scale)),
        _ => Err(format!(
            "{s:?} is not a listening time: write e.g. 5s, 500ms or 1m (at most 10 minutes)"
        )),
    }
}
