//! The `mqtt` driver's TLS keys (`ca_file`, `client_cert`, `client_key`): resolved against the
//! plant file's directory, only with a TLS broker URL, certificate and key together, files that
//! exist; every refusal names the file, the device and the key.

mod common;

use closedloop_plant::{DriverConfig, PlantError, parse_with_env};
use std::path::{Path, PathBuf};

/// `common::BASE` plus one MQTT device with `driver` as its driver table.
fn plant(driver: &str) -> String {
    format!(
        r#"{}
[[device]]
id = "desk"
driver = {driver}
[device.signals]
on = {{ topic = "desk/state", json = "/on", type = "bool" }}
"#,
        common::BASE
    )
}

/// A plant directory with `ca.pem`, `certs/client.pem` and `certs/client.key` in it.
fn plant_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::create_dir(dir.path().join("certs")).expect("mkdir");
    for f in ["ca.pem", "certs/client.pem", "certs/client.key"] {
        std::fs::write(dir.path().join(f), "PEM").expect("write");
    }
    dir
}

fn errors(src: &str, base: &Path) -> Vec<PlantError> {
    match parse_with_env(src, "workshop.toml", base, &common::env) {
        Ok(_) => panic!("the plant was accepted:\n{src}"),
        Err(e) => e.0,
    }
}

/// Exactly one error, at device `desk` and `key`, with every needle in its message; its
/// Display names the file, the device and the key.
#[track_caller]
fn one_error(src: &str, base: &Path, key: &str, needles: &[&str]) {
    let errs = errors(src, base);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    let e = &errs[0];
    assert_eq!(e.device.as_deref(), Some("desk"), "{e}");
    assert_eq!(e.key.as_deref(), Some(key), "{e}");
    for n in needles {
        assert!(e.message.contains(n), "{n:?} not in: {e}");
    }
    let shown = e.to_string();
    assert!(
        shown.starts_with("workshop.toml: device \"desk\", key ") && shown.contains(key),
        "{shown}"
    );
}

#[test]
fn tls_files_resolve_against_the_plant_directory() {
    let dir = plant_dir();
    let abs_key = dir.path().join("certs/client.key");
    let src = plant(&format!(
        r#"{{ kind = "mqtt", broker = "mqtts://broker.lan:8883", client_id = "cl", ca_file = "ca.pem", client_cert = "certs/client.pem", client_key = "{}" }}"#,
        abs_key.display()
    ));
    let p = parse_with_env(&src, "workshop.toml", dir.path(), &common::env).expect("valid");
    let desk = p.devices.iter().find(|d| d.id == "desk").expect("desk");
    let DriverConfig::Mqtt { tls, .. } = &desk.driver else {
        panic!("not mqtt: {:?}", desk.driver)
    };
    let base = std::path::absolute(dir.path()).expect("absolute");
    assert_eq!(tls.ca_file, Some(base.join("ca.pem")));
    assert_eq!(tls.client_cert, Some(base.join("certs/client.pem")));
    assert_eq!(tls.client_key, Some(abs_key));
}

#[test]
fn ssl_scheme_and_ca_file_alone_are_valid() {
    let dir = plant_dir();
    let src = plant(
        r#"{ kind = "mqtt", broker = "ssl://broker.lan", client_id = "cl", ca_file = "ca.pem" }"#,
    );
    parse_with_env(&src, "workshop.toml", dir.path(), &common::env).expect("valid");
    let src = plant(r#"{ kind = "mqtt", broker = "mqtts://broker.lan", client_id = "cl" }"#);
    let p = parse_with_env(&src, "workshop.toml", dir.path(), &common::env).expect("valid");
    let desk = p.devices.iter().find(|d| d.id == "desk").expect("desk");
    let DriverConfig::Mqtt { tls, .. } = &desk.driver else {
        panic!("not mqtt: {:?}", desk.driver)
    };
    assert_eq!(tls.ca_file, None, "no ca_file: the system's roots");
}

#[test]
fn tls_keys_on_a_plain_broker_say_to_use_mqtts() {
    let dir = plant_dir();
    for scheme in ["mqtt", "tcp"] {
        let src = plant(&format!(
            r#"{{ kind = "mqtt", broker = "{scheme}://broker.lan:1883", client_id = "cl", ca_file = "ca.pem" }}"#
        ));
        one_error(
            &src,
            dir.path(),
            "driver.ca_file",
            &["ca_file is for TLS", "plain MQTT", "mqtts://"],
        );
    }
    let src = plant(
        r#"{ kind = "mqtt", broker = "mqtt://broker.lan", client_id = "cl", client_cert = "certs/client.pem", client_key = "certs/client.key" }"#,
    );
    let errs = errors(&src, dir.path());
    let keys: Vec<_> = errs.iter().map(|e| e.key.as_deref()).collect();
    assert_eq!(
        keys,
        [Some("driver.client_cert"), Some("driver.client_key")],
        "{errs:#?}"
    );
    assert!(
        errs.iter().all(|e| e.message.contains("mqtts://")),
        "{errs:#?}"
    );
}

#[test]
fn a_client_certificate_needs_its_key_and_the_other_way_round() {
    let dir = plant_dir();
    let src = plant(
        r#"{ kind = "mqtt", broker = "mqtts://broker.lan", client_id = "cl", client_cert = "certs/client.pem" }"#,
    );
    one_error(
        &src,
        dir.path(),
        "driver.client_cert",
        &["without client_key", "both"],
    );
    let src = plant(
        r#"{ kind = "mqtt", broker = "mqtts://broker.lan", client_id = "cl", client_key = "certs/client.key" }"#,
    );
    one_error(
        &src,
        dir.path(),
        "driver.client_key",
        &["without client_cert", "both"],
    );
}

#[test]
fn missing_tls_files_are_named() {
    let dir = plant_dir();
    let base = std::path::absolute(dir.path()).expect("absolute");
    let cases = [
        ("ca_file", "missing-ca.pem", r#"ca_file = "missing-ca.pem""#),
        (
            "client_key",
            "certs/missing.key",
            r#"client_cert = "certs/client.pem", client_key = "certs/missing.key""#,
        ),
    ];
    for (key, file, keys) in cases {
        let src = plant(&format!(
            r#"{{ kind = "mqtt", broker = "mqtts://broker.lan", client_id = "cl", {keys} }}"#
        ));
        let path: PathBuf = base.join(file);
        one_error(
            &src,
            dir.path(),
            &format!("driver.{key}"),
            &[&format!("\"{}\"", path.display()), "does not exist"],
        );
    }
    let src = plant(
        r#"{ kind = "mqtt", broker = "mqtts://broker.lan", client_id = "cl", ca_file = "certs" }"#,
    );
    one_error(
        &src,
        dir.path(),
        "driver.ca_file",
        &["certs", "is not a file"],
    );
}

#[test]
fn misspelt_tls_keys_are_unknown() {
    let dir = plant_dir();
    let src = plant(
        r#"{ kind = "mqtt", broker = "mqtts://broker.lan", client_id = "cl", cafile = "ca.pem" }"#,
    );
    let errs = errors(&src, dir.path());
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_eq!(errs[0].device.as_deref(), Some("desk"));
    assert!(errs[0].message.contains("ca_file"), "{}", errs[0]);
}

#[test]
fn opcua_security_needs_a_pinned_server_certificate() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("server.der"), b"cert").unwrap();
    let plant = |driver: &str| {
        format!(
            r#"
[[device]]
id = "pump"
description = "OPC UA pump"
driver = {{ {driver} }}
[device.signals]
speed = {{ node = "ns=2;s=Speed" }}
"#
        )
    };
    let parse = |src: String| closedloop_plant::parse(&src, "p.toml", dir.path());
    let ok = parse(plant(
        r#"kind = "opcua", endpoint = "opc.tcp://h:4840", security = "sign", server_cert = "server.der""#,
    ))
    .expect("valid");
    match &ok.devices[0].driver {
        closedloop_plant::DriverConfig::Opcua { server_cert, .. } => {
            assert_eq!(
                server_cert.as_deref(),
                Some(dir.path().join("server.der").as_path())
            )
        }
        other => panic!("{other:?}"),
    }
    let e = parse(plant(
        r#"kind = "opcua", endpoint = "opc.tcp://h:4840", security = "sign_and_encrypt""#,
    ))
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("pump") && e.contains("driver.server_cert") && e.contains("pinned"),
        "{e}"
    );
    let e = parse(plant(
        r#"kind = "opcua", endpoint = "opc.tcp://h:4840", security = "sign", server_cert = "missing.der""#,
    ))
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("driver.server_cert") && e.contains("missing.der"),
        "{e}"
    );
    let e = parse(plant(
        r#"kind = "opcua", endpoint = "opc.tcp://h:4840", server_cert = "server.der""#,
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("driver.security"), "{e}");
    let e = parse(plant(
        r#"kind = "opcua", endpoint = "opc.tcp://h:4840", security = "sign", server_cert = "server.der", client_cert = "server.der""#,
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("driver.client_key"), "{e}");
}

/// Addresses are parsed once, at load, into typed values (`BrokerUrl`, `OpcuaSecurity`,
/// `CanInterface`): a bad one is refused there, naming the key and saying how to write it,
/// and nothing after loading parses the string again.
#[test]
fn addresses_are_parsed_at_load_and_a_bad_one_names_its_key() {
    let dir = plant_dir();
    let bad_port =
        plant(r#"{ kind = "mqtt", broker = "mqtt://broker.lan:99999", client_id = "cl" }"#);
    one_error(
        &bad_port,
        dir.path(),
        "driver.broker",
        &["mqtt://broker.lan:99999", "1–65535"],
    );
    let with_path = plant(r#"{ kind = "mqtt", broker = "mqtt://broker.lan/x", client_id = "cl" }"#);
    one_error(&with_path, dir.path(), "driver.broker", &["no path"]);
    let bare = |driver: &str| {
        format!(
            "{}\n[[device]]\nid = \"desk\"\ndriver = {driver}\n",
            common::BASE
        )
    };
    let security =
        bare(r#"{ kind = "opcua", endpoint = "opc.tcp://h:4840", security = "Basic256" }"#);
    one_error(
        &security,
        dir.path(),
        "driver.security",
        &["\"Basic256\" is not a security mode", "sign_and_encrypt"],
    );
    std::fs::write(dir.path().join("bus.dbc"), "VERSION \"\"\n").expect("write");
    for (interface, says) in [
        ("usb:whatever", "socketcan:can0"),
        ("socketcan:", "1-15 characters"),
    ] {
        let src = bare(&format!(
            r#"{{ kind = "can", interface = "{interface}", dbc = "bus.dbc" }}"#
        ));
        one_error(&src, dir.path(), "driver.interface", &[interface, says]);
    }
    let ok = parse_with_env(
        &plant(r#"{ kind = "mqtt", broker = "tcp://[::1]", client_id = "cl" }"#),
        "workshop.toml",
        dir.path(),
        &common::env,
    )
    .expect("a valid plant");
    let desk = ok.devices.iter().find(|d| d.id == "desk").expect("desk");
    let DriverConfig::Mqtt { broker, .. } = &desk.driver else {
        panic!("an mqtt driver")
    };
    assert_eq!(
        (broker.host.as_str(), broker.port, broker.tls),
        ("::1", 1883, false)
    );
    assert_eq!(broker.to_string(), "tcp://[::1]");
}

/// A bool read from words names both: a payload in neither (Home Assistant's `None`) is no
/// value, never the other state — so `true_values` alone is refused, naming the fix.
#[test]
fn true_values_need_false_values_beside_them_and_status_json_a_status_topic() {
    let dir = plant_dir();
    let driver = r#"{ kind = "mqtt", broker = "mqtt://broker.lan", client_id = "cl" }"#;
    let src = plant(driver).replace(
        r#"on = { topic = "desk/state", json = "/on", type = "bool" }"#,
        r#"on = { topic = "desk/state", true_values = ["ON"] }"#,
    );
    let errs = errors(&src, dir.path());
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_eq!(errs[0].key.as_deref(), Some("signals.on.false_values"));
    assert!(
        errs[0]
            .message
            .contains("true_values needs false_values beside it")
            && errs[0].message.contains("false_values = [\"OFF\", \"0\"]"),
        "{}",
        errs[0]
    );
    let both = src.replace(
        r#"true_values = ["ON"]"#,
        r#"true_values = ["ON"], false_values = ["OFF"]"#,
    );
    parse_with_env(&both, "workshop.toml", dir.path(), &common::env).expect("both named");
    let status = plant(driver).replace(
        "[device.signals]\non = ",
        "liveness = { status_json = \"/state\" }\n[device.signals]\non = ",
    );
    let errs = errors(&status, dir.path());
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_eq!(errs[0].device.as_deref(), Some("desk"));
    assert_eq!(
        errs[0].key.as_deref(),
        Some("liveness.status_json"),
        "{errs:#?}"
    );
    let ok = plant(driver).replace(
        "[device.signals]\non = ",
        "liveness = { status_topic = \"z/plug/availability\", status_json = \"/state\" }\n[device.signals]\non = ",
    );
    let p = parse_with_env(&ok, "workshop.toml", dir.path(), &common::env).expect("valid");
    let desk = p.devices.iter().find(|d| d.id == "desk").expect("desk");
    assert_eq!(desk.liveness.status_json.as_deref(), Some("/state"));
}

/// `time_json` is a pointer beside `json`: a payload that is the value itself carries no time.
#[test]
fn time_json_is_a_pointer_beside_json() {
    let dir = plant_dir();
    let driver = r#"{ kind = "mqtt", broker = "mqtt://broker.lan", client_id = "cl" }"#;
    let signal = r#"on = { topic = "desk/state", json = "/on", type = "bool" }"#;
    let with = |s: &str| plant(driver).replace(signal, s);
    let cases = [
        (
            r#"on = { topic = "desk/state", json = "/on", time_json = "time", type = "bool" }"#,
            "\"time\" is not a JSON pointer; write it with a leading slash, e.g. \"/time\"",
        ),
        (
            r#"on = { topic = "desk/state", time_json = "/time", type = "bool" }"#,
            "name the value with json = \"/...\" too",
        ),
    ];
    for (src, words) in cases {
        let errs = errors(&with(src), dir.path());
        assert_eq!(errs.len(), 1, "{errs:#?}");
        assert_eq!(errs[0].key.as_deref(), Some("signals.on.time_json"));
        assert!(errs[0].message.contains(words), "{}", errs[0]);
    }
    let ok = with(
        r#"on = { topic = "desk/state", json = "/on", time_json = "/last_seen", type = "bool" }"#,
    );
    let p = parse_with_env(&ok, "workshop.toml", dir.path(), &common::env).expect("valid");
    let desk = p.devices.iter().find(|d| d.id == "desk").expect("desk");
    let closedloop_plant::Source::Topic { time_json, .. } = &desk.signals[0].source else {
        panic!("a topic signal")
    };
    assert_eq!(time_json.as_deref(), Some("/last_seen"));
}
