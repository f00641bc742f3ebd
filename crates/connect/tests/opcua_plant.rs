//! An OPC UA driver table's `username` / `password` become the session's identity when the
//! drivers are built — with the password from `${env:…}` and never in `Debug` output — and the
//! devices sharing one endpoint (one session) must log in the same way.

use closedloop_connect::{ConnectError, Connection, build_drivers};
use closedloop_opcua::Identity;

/// Two pumps on one endpoint; `pump2` logs in with `password2`.
fn plant(password2: &str) -> closedloop_plant::Plant {
    let src = format!(
        r#"
[[device]]
id = "pump1"
description = "OPC UA pump"
driver = {{ kind = "opcua", endpoint = "opc.tcp://plc.lan:4840/", username = "operator", password = "${{env:PLC_PASSWORD}}" }}
[device.signals]
speed = {{ node = "ns=2;s=Pump1.Speed" }}

[[device]]
id = "pump2"
description = "OPC UA pump"
driver = {{ kind = "opcua", endpoint = "opc.tcp://plc.lan:4840/", username = "operator", password = "{password2}" }}
[device.signals]
speed = {{ node = "ns=2;s=Pump2.Speed" }}
"#
    );
    let env = |name: &str| (name == "PLC_PASSWORD").then(|| "from-the-env".to_string());
    closedloop_plant::parse_with_env(&src, "plc.toml", std::path::Path::new("/srv"), &env)
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_plant_s_user_and_env_password_become_the_session_identity() {
    let drivers = build_drivers(&plant("${env:PLC_PASSWORD}")).expect("drivers");
    let Some(Connection::Opcua(config)) = drivers.map.get("pump1") else {
        panic!("an OPC UA connection for pump1");
    };
    assert_eq!(
        config.identity,
        Identity::UserName {
            user: "operator".into(),
            password: "from-the-env".into(),
        }
    );
    let shown = format!("{config:?}");
    assert!(
        shown.contains("operator") && !shown.contains("from-the-env"),
        "{shown}"
    );
}

#[test]
fn devices_on_one_endpoint_must_log_in_the_same_way() {
    let refusal = match build_drivers(&plant("another-password")) {
        Err(e @ ConnectError::Driver { .. }) => e.to_string(),
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("accepted"),
    };
    assert!(
        refusal.contains("pump2")
            && refusal.contains("credentials")
            && refusal.contains("username and password"),
        "{refusal}"
    );
    assert!(
        !refusal.contains("another-password") && !refusal.contains("from-the-env"),
        "{refusal}"
    );
}
