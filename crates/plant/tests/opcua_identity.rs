//! The `opcua` driver's identity keys: `username` and `password` together (a user-name login,
//! the password typically from `${env:NAME}`) or neither (anonymous); half a login is refused at
//! load, naming the missing key and how to add it, and the password never shows in `Debug`.

mod common;

use closedloop_plant::{DriverConfig, PlantError, Secret, parse_with_env};
use std::path::Path;

/// `common::BASE` plus one OPC UA pump whose driver table ends with `identity`.
fn plant(identity: &str) -> String {
    format!(
        r#"{}
[[device]]
id = "pump"
description = "OPC UA pump"
driver = {{ kind = "opcua", endpoint = "opc.tcp://plc.lan:4840/"{identity} }}
[device.signals]
speed = {{ node = "ns=2;s=Pump1.Speed" }}
"#,
        common::BASE
    )
}

/// `PLC_PASSWORD` is set; nothing else is.
fn env(name: &str) -> Option<String> {
    (name == "PLC_PASSWORD").then(|| "from-the-env".to_string())
}

fn driver(identity: &str) -> DriverConfig {
    let p = parse_with_env(&plant(identity), "workshop.toml", Path::new("/srv"), &env)
        .unwrap_or_else(|e| panic!("{e}"));
    let pump = p.devices.iter().find(|d| d.id == "pump").expect("pump");
    pump.driver.clone()
}

/// The one error loading `identity` gives, at device `pump`.
#[track_caller]
fn refusal(identity: &str) -> PlantError {
    let errs = match parse_with_env(&plant(identity), "workshop.toml", Path::new("/srv"), &env) {
        Ok(_) => panic!("accepted: {identity}"),
        Err(e) => e.0,
    };
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_eq!(errs[0].device.as_deref(), Some("pump"), "{}", errs[0]);
    errs[0].clone()
}

#[test]
fn a_user_and_an_env_password_are_a_login_and_neither_is_anonymous() {
    let DriverConfig::Opcua {
        username, password, ..
    } = driver(r#", username = "operator", password = "${env:PLC_PASSWORD}""#)
    else {
        panic!("an opcua driver")
    };
    assert_eq!(username.as_deref(), Some("operator"));
    assert_eq!(password, Some(Secret("from-the-env".into())));
    let shown = format!(
        "{:?}",
        driver(r#", username = "u", password = "${env:PLC_PASSWORD}""#)
    );
    assert!(!shown.contains("from-the-env"), "{shown}");

    let DriverConfig::Opcua {
        username, password, ..
    } = driver("")
    else {
        panic!("an opcua driver")
    };
    assert_eq!((username, password), (None, None));
}

#[test]
fn a_user_without_a_password_names_the_missing_password() {
    let e = refusal(r#", username = "operator""#);
    assert_eq!(e.key.as_deref(), Some("driver.password"), "{e}");
    assert!(
        e.message.contains("username is given without password")
            && e.message.contains("password = \"${env:NAME}\"")
            && e.message.contains("remove username"),
        "{e}"
    );
    assert!(
        e.to_string()
            .starts_with("workshop.toml: device \"pump\", key driver.password: "),
        "{e}"
    );
}

#[test]
fn a_password_without_a_user_names_the_missing_user() {
    let e = refusal(r#", password = "${env:PLC_PASSWORD}""#);
    assert_eq!(e.key.as_deref(), Some("driver.username"), "{e}");
    assert!(
        e.message.contains("password is given without username")
            && e.message.contains("remove password"),
        "{e}"
    );
    assert!(!e.to_string().contains("from-the-env"), "{e}");
}

#[test]
fn an_empty_user_is_refused() {
    let e = refusal(r#", username = "", password = "pw""#);
    assert_eq!(e.key.as_deref(), Some("driver.username"), "{e}");
    assert!(e.message.contains("must not be empty"), "{e}");
}

#[test]
fn an_unset_password_variable_is_named() {
    let e = refusal(r#", username = "operator", password = "${env:NOT_SET}""#);
    assert_eq!(e.key.as_deref(), Some("driver.password"), "{e}");
    assert!(e.message.contains("NOT_SET"), "{e}");
}

#[test]
fn a_misspelt_identity_key_is_unknown() {
    let e = refusal(r#", user = "operator", password = "pw""#);
    assert!(e.message.contains("username"), "{e}");
}
