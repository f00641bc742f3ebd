//! The validation pass: defaults, and every refusal naming its key (docs/simulator.md).

use closedloop_sim::{
    DEFAULT_SEED, Fault, FaultSpec, Model, RelayOptions, SimConfig, SimConfigError, SimDevice,
    StepperOptions,
};

fn parse(table: &str) -> SimConfig {
    toml::from_str(table).expect("test TOML parses")
}

fn refused(table: &str) -> SimConfigError {
    match parse(table).validate() {
        Ok(v) => panic!("expected a refusal of {table:?}, got {v:?}"),
        Err(e) => e,
    }
}

/// Asserts the key and that the message mentions each of `words`.
fn assert_refused(table: &str, key: &str, words: &[&str]) {
    let e = refused(table);
    assert_eq!(e.key(), key, "{e}");
    let msg = e.to_string();
    for w in words {
        assert!(msg.contains(w), "message {msg:?} should mention {w:?}");
    }
}

#[test]
fn defaults_are_filled_in() {
    let v = parse(r#"model = "relay""#).validate().unwrap();
    assert_eq!(
        v.model,
        Model::Relay(RelayOptions {
            feedback: true,
            pull_in_ms: 10
        })
    );
    assert_eq!((v.timeout_ms, v.seed), (500, DEFAULT_SEED));
    let v = parse(r#"model = "stepper""#).validate().unwrap();
    let expect = StepperOptions {
        speed_mm_s: 100.0,
        travel_mm: [0.0, 300.0],
    };
    assert_eq!(v.model, Model::Stepper(expect));
    let v = parse("model = \"stepper\"\nfaults = [{ kind = \"stall\", at_mm = 70.0 }]").validate();
    assert_eq!(
        v.unwrap().faults,
        vec![FaultSpec::now(Fault::Stall { at_mm: Some(70.0) })]
    );
}

#[test]
fn model_and_its_options() {
    assert_refused(
        r#"model = "valve""#,
        "model",
        &["valve", "relay", "stepper"],
    );
    assert_refused(
        "model = \"relay\"\nspeed_mm_s = 5.0",
        "speed_mm_s",
        &["relay", "remove"],
    );
    assert_refused(
        "model = \"stepper\"\nfeedback = true",
        "feedback",
        &["stepper"],
    );
    assert_refused(
        "model = \"sensor\"\nheartbeat_s = 1.0",
        "heartbeat_s",
        &["sensor"],
    );
    assert_refused("model = \"heater\"\nvalue = 1.0", "value", &["heater"]);
}

#[test]
fn ranges() {
    assert_refused(
        "model = \"stepper\"\nspeed_mm_s = 0.0",
        "speed_mm_s",
        &["at least"],
    );
    assert_refused(
        "model = \"stepper\"\nspeed_mm_s = nan",
        "speed_mm_s",
        &["NaN"],
    );
    assert_refused(
        "model = \"stepper\"\ntravel_mm = [300.0, 0.0]",
        "travel_mm",
        &["min < max"],
    );
    assert_refused(
        "model = \"stepper\"\ntravel_mm = [0.0, 1e9]",
        "travel_mm",
        &["i32"],
    );
    assert_refused(
        "model = \"relay\"\npull_in_ms = 100000",
        "pull_in_ms",
        &["60000"],
    );
    assert_refused(
        "model = \"relay\"\ntimeout_ms = 0",
        "timeout_ms",
        &["600000"],
    );
    assert_refused(
        "model = \"heater\"\nrate_c_per_s = 0.0",
        "rate_c_per_s",
        &["above 0"],
    );
    assert_refused(
        "model = \"heater\"\ncool_c_per_s = -1.0",
        "cool_c_per_s",
        &["above 0"],
    );
    assert_refused(
        "model = \"heater\"\nambient_c = 5000.0",
        "ambient_c",
        &["i16"],
    );
    assert_refused("model = \"sensor\"\nnoise = -0.1", "noise", &["0 or more"]);
    assert_refused("model = \"sensor\"\nvalue = 4000.0", "value", &["i16"]);
    assert_refused(
        "model = \"sensor\"\nvalue = 3000.0\nnoise = 500.0",
        "noise",
        &["value ± noise"],
    );
}

#[test]
fn fault_kinds_and_models() {
    let relay = "model = \"relay\"\nfaults = ";
    assert_refused(
        &format!("{relay}[{{ kind = \"melt\" }}]"),
        "faults[0].kind",
        &["melt", "stall"],
    );
    assert_refused(
        &format!("{relay}[{{ kind = \"stall\" }}]"),
        "faults[0].kind",
        &["stepper", "relay"],
    );
    assert_refused(
        "model = \"stepper\"\nfaults = [{ kind = \"nak\" }, { kind = \"brownout\" }]",
        "faults[1].kind",
        &["brownout", "stepper"],
    );
    assert_refused(
        "model = \"heater\"\nfaults = [{ kind = \"swapped_contacts\" }]",
        "faults[0].kind",
        &["contact"],
    );
    assert_refused(
        &format!("{relay}[{{ kind = \"nak\" }}, {{ kind = \"nak\", after_ms = 5 }}]"),
        "faults[1].kind",
        &["faults[0]", "once"],
    );
}

#[test]
fn fault_options_required_and_forbidden() {
    let relay = "model = \"relay\"\nfaults = ";
    assert_refused(
        &format!("{relay}[{{ kind = \"nak\" }}, {{ kind = \"reboot\" }}]"),
        "faults[1].down_ms",
        &["reboot", "add"],
    );
    assert_refused(
        &format!("{relay}[{{ kind = \"reboot\", down_ms = 0 }}]"),
        "faults[0].down_ms",
        &["1 to"],
    );
    assert_refused(
        &format!("{relay}[{{ kind = \"latency_ms\" }}]"),
        "faults[0].ms",
        &["latency_ms"],
    );
    assert_refused(
        &format!("{relay}[{{ kind = \"drop_rate\" }}]"),
        "faults[0].p",
        &["drop_rate"],
    );
    assert_refused(
        &format!("{relay}[{{ kind = \"drop_rate\", p = 1.5 }}]"),
        "faults[0].p",
        &["probability"],
    );
    assert_refused(
        &format!("{relay}[{{ kind = \"nak\", down_ms = 5 }}]"),
        "faults[0].down_ms",
        &["only `after_ms`"],
    );
    assert_refused(
        &format!("{relay}[{{ kind = \"reboot\", down_ms = 5, p = 0.1 }}]"),
        "faults[0].p",
        &["`down_ms`"],
    );
    assert_refused(
        &format!("{relay}[{{ kind = \"crc_error\", after_ms = 100000000 }}]"),
        "faults[0].after_ms",
        &["a day"],
    );
    let slide = "model = \"stepper\"\nfaults = ";
    assert_refused(
        &format!("{slide}[{{ kind = \"stall\", at_mm = 400.0 }}]"),
        "faults[0].at_mm",
        &["travel_mm"],
    );
    assert_refused(
        &format!("{slide}[{{ kind = \"stall\", at_mm = 70.0, after_ms = 5 }}]"),
        "faults[0].at_mm",
        &["after_ms"],
    );
}

#[test]
fn mqtt_relay_validates_but_does_not_run_in_process() {
    assert_refused(r#"model = "mqtt-relay""#, "prefix", &["prefix", "add"]);
    assert_refused(
        "model = \"mqtt-relay\"\nprefix = \"lab/#\"",
        "prefix",
        &["wildcards"],
    );
    assert_refused(
        "model = \"mqtt-relay\"\nprefix = \"lab\"\nfaults = [{ kind = \"crc_error\" }]",
        "faults[0].kind",
        &["CRC"],
    );
    assert_refused(
        "model = \"mqtt-relay\"\nprefix = \"lab\"\nfaults = [{ kind = \"nak\" }]",
        "faults[0].kind",
        &["zombie", "drop_rate"],
    );
    let cfg =
        parse("model = \"mqtt-relay\"\nprefix = \"lab/lamp\"\nfaults = [{ kind = \"brownout\" }]");
    assert!(cfg.validate().is_ok());
    let e = SimDevice::from_config(&cfg).unwrap_err();
    assert_eq!(e.key(), "model");
    assert!(e.to_string().contains("closedloop sim"), "{e}");
}

#[test]
fn unknown_keys_are_refused_by_the_parser() {
    assert!(toml::from_str::<SimConfig>("model = \"relay\"\nspeed = 1").is_err());
    assert!(
        toml::from_str::<SimConfig>("model = \"relay\"\nfaults = [{ kind = \"nak\", x = 1 }]")
            .is_err()
    );
}
