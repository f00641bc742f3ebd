//! How a device's values reach the gateway, as the plant declares it, in words for the operator
//! page: a polled device (the simulator, Modbus) is read every `poll_ms`; a device that pushes
//! its values (MQTT, CAN, OPC UA's subscriptions) is never polled, and what the plant declares
//! for it is how long it may stay silent (`liveness.max_silence_s`) and, for MQTT, the status
//! topic that says it went away. Showing "poll 100 ms" for a device nobody polls would be false.

use closedloop_plant::{Device, DriverConfig};
use serde_json::{Value, json};

/// `{kind: "polled"|"pushed", driver, poll_ms?, max_silence_s, status_topic?, text}` for `d`.
pub(super) fn reporting(d: &Device) -> Value {
    let silence = seconds(d.liveness.max_silence_s);
    let kind = d.driver.kind();
    let polled = d.driver.is_register_based();
    let text = match &d.driver {
        DriverConfig::Sim(_) | DriverConfig::ModbusTcp { .. } | DriverConfig::ModbusRtu { .. } => {
            let beat = d.liveness.counter.map_or(String::new(), |h| {
                format!(", or when its heartbeat (holding register {h}) stops changing")
            });
            format!(
                "read every {} · offline after {silence} without an answer{beat}",
                millis(d.poll_ms)
            )
        }
        DriverConfig::Mqtt { .. } => {
            let will = d.liveness.status_topic.as_ref().map_or(String::new(), |t| {
                format!(", or when {t} says {:?}", d.liveness.offline)
            });
            format!(
                "pushes its values over MQTT (not polled) · offline after {silence} without a report{will}"
            )
        }
        DriverConfig::Opcua { .. } => format!(
            "sends changes over OPC UA (sampled every {}), read again every {} · offline after {silence} without a good value",
            millis(d.poll_ms),
            // As the OPC UA link checks: a third of the silence window, never below poll_ms.
            seconds((d.liveness.max_silence_s / 3.0).max(d.poll_ms as f64 / 1000.0))
        ),
        DriverConfig::Can { .. } => {
            format!("sends CAN frames of its own accord · offline after {silence} without a frame")
        }
    };
    let mut v = json!({
        "kind": if polled { "polled" } else { "pushed" },
        "driver": kind,
        "max_silence_s": d.liveness.max_silence_s,
        "text": text,
    });
    if polled {
        v["poll_ms"] = json!(d.poll_ms);
    }
    if let Some(topic) = &d.liveness.status_topic {
        v["status_topic"] = json!(topic);
    }
    v
}

/// "100 ms", "1.5 s".
fn millis(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        seconds(ms as f64 / 1000.0)
    }
}

/// "2 s", "1.5 s", "0.33 s", "2 min".
fn seconds(s: f64) -> String {
    if s >= 120.0 && (s / 60.0).fract() == 0.0 {
        return format!("{} min", s / 60.0);
    }
    format!("{} s", (s * 100.0).round() / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(driver: &str, liveness: &str) -> Device {
        let src = format!(
            "[server]\nname = \"t\"\njournal = \"sqlite::memory:\"\n\
             [[device]]\nid = \"d\"\ndescription = \"d\"\ndriver = {driver}\npoll_ms = 100\n{liveness}\n\
             [device.signals]\n{}\n",
            if driver.contains("mqtt") {
                "on = { topic = \"lab/d/state\", json = \"/on\", type = \"bool\" }"
            } else {
                "contact = { discrete_input = 0 }"
            }
        );
        let plant = closedloop_plant::parse(&src, "t.toml", std::path::Path::new("."))
            .unwrap_or_else(|e| panic!("{e}"));
        (*plant.devices[0]).clone()
    }

    #[test]
    fn a_polled_device_shows_its_poll_period() {
        let r = reporting(&device(r#"{ kind = "sim", model = "relay" }"#, ""));
        assert_eq!(r["kind"], "polled");
        assert_eq!(r["poll_ms"], 100);
        let text = r["text"].as_str().unwrap();
        assert!(text.starts_with("read every 100 ms"), "{text}");
    }

    #[test]
    fn an_mqtt_device_shows_how_long_it_may_be_silent_not_a_poll_period() {
        let driver =
            r#"{ kind = "mqtt", broker = "mqtt://127.0.0.1:1", client_id = "closedloop-t" }"#;
        let live = r#"liveness = { status_topic = "lab/d/status", max_silence_s = 1.5 }"#;
        let r = reporting(&device(driver, live));
        assert_eq!(r["kind"], "pushed");
        assert_eq!(r["driver"], "mqtt");
        assert!(r.get("poll_ms").is_none(), "{r}");
        let text = r["text"].as_str().unwrap();
        assert!(
            !text.contains("poll ") && !text.contains("100 ms"),
            "{text}"
        );
        assert!(
            text.contains("offline after 1.5 s without a report"),
            "{text}"
        );
        assert!(text.contains("lab/d/status"), "{text}");
    }

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(millis(100), "100 ms");
        assert_eq!(millis(1500), "1.5 s");
        assert_eq!(seconds(2.0), "2 s");
        assert_eq!(seconds(1.0 / 3.0), "0.33 s");
        assert_eq!(seconds(600.0), "10 min");
    }
}
