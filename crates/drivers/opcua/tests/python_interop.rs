//! Interop with an OPC UA stack no one here wrote: tests/python/opcua/pump_server.py, an asyncua
//! 2.1 server, driven by this crate's client — browse, read, monitor, writes with the node's own
//! data type, method calls with typed arguments, the fence, the server dying mid-monitor, and a
//! server that takes only a user name and password (`--login`), also over a Basic256Sha256
//! signed-and-encrypted channel (`--secure`).
//!
//! The Python environment is a prerequisite, never a reason to skip: without it these tests fail
//! and say how to install it (`bash scripts/python-env`). Starting the Python server and
//! finding that environment is `common/mod.rs`.

mod common;

use std::time::Duration;

use closedloop_contract::Value;
use closedloop_opcua::testing::*;
use closedloop_opcua::{Class, Error, Identity, Monitor, OpcuaClient, SessionState, classify};
use common::{Pump, pump, server_certificate};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closedloop_drives_an_asyncua_pump() {
    let server = Pump::start().await;
    let client = connect(&server.endpoint).await;
    browse_names_each_node_s_class_and_type(&client).await;

    let read = client
        .read(&[pump("Speed"), pump("Running")])
        .await
        .expect("read");
    assert_eq!(read[0].value, Some(Value::Number(0.0)));
    assert_eq!(read[1].value, Some(Value::Bool(false)));
    assert!(read.iter().all(|u| u.good));

    let (speed, running) = (pump("Speed"), pump("Running"));
    let mut monitor = client.monitor(&[speed.clone(), running.clone()], 20);
    next_where(&mut monitor, &running, |u| {
        u.value == Some(Value::Bool(false))
    })
    .await;

    a_double_node_gets_a_double(&client, &mut monitor, &speed).await;
    an_int16_node_gets_an_int16(&client).await;
    method_arguments_take_the_declared_types(&client).await;
    start_and_stop_are_followed_after_the_fence(&client, &mut monitor, &running).await;

    let err = client.write(&running, Value::Bool(true)).await.unwrap_err();
    assert_eq!(classify(&err), Class::RegisterInvalid, "{err}");
    assert!(
        server.stderr().lines().all(|l| !l.contains("Traceback")),
        "{}",
        server.stderr()
    );
}

/// Browsing the pump names each variable's data type and its methods.
async fn browse_names_each_node_s_class_and_type(client: &OpcuaClient) {
    let found = client.browse("ns=2;s=Pump1", 1, 50).await.expect("browse");
    let kind = |id: &str| {
        found
            .entries
            .iter()
            .find(|e| e.node_id == id)
            .map(|e| (e.node_class.clone(), e.data_type.clone()))
    };
    assert_eq!(
        kind(&pump("Speed")),
        Some(("Variable".into(), Some("Double".into())))
    );
    assert_eq!(
        kind(&pump("SpeedLimit")),
        Some(("Variable".into(), Some("Int16".into())))
    );
    assert_eq!(
        kind(&pump("Running")),
        Some(("Variable".into(), Some("Boolean".into())))
    );
    assert_eq!(
        kind(&pump("Start")).map(|k| k.0),
        Some("Method".into()),
        "{found:?}"
    );
}

/// A Double node gets a Double, read back after the acknowledgement.
async fn a_double_node_gets_a_double(client: &OpcuaClient, monitor: &mut Monitor, speed: &str) {
    let ack = client
        .write(speed, Value::Number(1200.0))
        .await
        .expect("write Speed");
    // asyncua publishes a written value as it applies the write, so its data change may come
    // before the acknowledgement (and then, rightly, does not count). A read issued after the
    // acknowledgement is the readback that counts.
    next_where(monitor, speed, |u| u.value == Some(Value::Number(1200.0))).await;
    let back = client.read(&[speed.to_string()]).await.expect("read back");
    assert_eq!(back[0].value, Some(Value::Number(1200.0)));
    assert!(back[0].seq > ack.seq, "{} vs {}", back[0].seq, ack.seq);
}

/// An Int16 node gets an Int16 (asyncua keeps the variant it is given), and a value an Int16
/// cannot hold is refused before anything is sent.
async fn an_int16_node_gets_an_int16(client: &OpcuaClient) {
    client
        .write(&pump("SpeedLimit"), Value::Number(300.0))
        .await
        .expect("write SpeedLimit");
    let back = client.read(&[pump("SpeedLimit")]).await.expect("read back");
    assert_eq!(
        (back[0].value, back[0].value_type.as_str()),
        (Some(Value::Number(300.0)), "Int16")
    );
    let err = client
        .write(&pump("SpeedLimit"), Value::Number(40000.0))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Value { ref data_type, .. } if data_type == "Int16"),
        "{err}"
    );
    assert_eq!(classify(&err), Class::RegisterInvalid);
}

/// Method arguments take the declared types too; outputs come back as JSON.
async fn method_arguments_take_the_declared_types(client: &OpcuaClient) {
    let (_, outputs) = client
        .call(
            "ns=2;s=Pump1",
            &pump("SetLimit"),
            vec![Value::Number(250.0)],
        )
        .await
        .expect("SetLimit(250)");
    assert_eq!(outputs, vec![serde_json::json!(300.0)]);
    let err = client
        .call(
            "ns=2;s=Pump1",
            &pump("SetLimit"),
            vec![Value::Number(70000.0)],
        )
        .await
        .unwrap_err();
    assert_eq!(classify(&err), Class::RegisterInvalid, "{err}");
}

/// Start: acknowledged at once (running, not completed); Running follows later, after the
/// fence. Stop likewise.
async fn start_and_stop_are_followed_after_the_fence(
    client: &OpcuaClient,
    monitor: &mut Monitor,
    running: &str,
) {
    let (ack, _) = client
        .call("ns=2;s=Pump1", &pump("Start"), vec![])
        .await
        .expect("Start()");
    assert_eq!(ack.status, "Good");
    let now = client.read(&[running.to_string()]).await.expect("read");
    assert_eq!(
        now[0].value,
        Some(Value::Bool(false)),
        "Running follows Start only later"
    );
    let on = next_where(monitor, running, |u| u.value == Some(Value::Bool(true))).await;
    assert!(on.seq > ack.seq, "{} vs {}", on.seq, ack.seq);
    assert!(on.good);

    let (ack, _) = client
        .call("ns=2;s=Pump1", &pump("Stop"), vec![])
        .await
        .expect("Stop()");
    let off = next_where(monitor, running, |u| u.value == Some(Value::Bool(false))).await;
    assert!(off.seq > ack.seq);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_asyncua_server_mid_monitor_is_offline() {
    let mut server = Pump::start().await;
    let client = connect(&server.endpoint).await;
    let speed = pump("Speed");
    let mut monitor = client.monitor(std::slice::from_ref(&speed), 20);
    next_where(&mut monitor, &speed, |u| u.good).await;

    server.child.kill().await.expect("kill pump_server.py");
    let state = wait_session(&client, false).await;
    assert!(matches!(state, SessionState::Disconnected(_)));
    let err = client.read(std::slice::from_ref(&speed)).await.unwrap_err();
    assert_eq!(classify(&err), Class::Offline, "{err}");
    let err = client.write(&speed, Value::Number(1.0)).await.unwrap_err();
    assert_eq!(classify(&err), Class::Offline, "{err}");
}

/// The login pump_server.py is started with in the identity tests.
const LOGIN: &str = "operator:s3cret-pw";

/// A client of `endpoint` logging in as `identity` (not waited for).
fn client_as(endpoint: &str, identity: Identity) -> OpcuaClient {
    let config = closedloop_opcua::OpcuaConfig {
        identity,
        ..quick(endpoint)
    };
    OpcuaClient::connect(config).expect("a valid config")
}

fn operator(password: &str) -> Identity {
    Identity::UserName {
        user: "operator".into(),
        password: password.into(),
    }
}

/// Waits until the session is disconnected for a reason containing `needle`.
async fn wait_reason(client: &OpcuaClient, needle: &str) -> String {
    let mut state = client.session_state();
    let found =
        state.wait_for(|s| matches!(s, SessionState::Disconnected(w) if w.contains(needle)));
    match tokio::time::timeout(WAIT, found).await {
        Ok(Ok(s)) => match &*s {
            SessionState::Disconnected(why) => why.clone(),
            SessionState::Connected => unreachable!(),
        },
        _ => panic!(
            "no reason with {needle:?} (now {:?})",
            *client.session_state().borrow()
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_name_and_password_log_in_to_an_asyncua_server() {
    let server = Pump::start_with(&["--login", LOGIN]).await;
    let client = client_as(&server.endpoint, operator("s3cret-pw"));
    wait_session(&client, true).await;
    let read = client
        .read(&[pump("Speed")])
        .await
        .expect("read as operator");
    assert_eq!(read[0].value, Some(Value::Number(0.0)));
    assert!(read[0].good, "{:?}", read[0]);
    client
        .write(&pump("Speed"), Value::Number(900.0))
        .await
        .expect("write as operator");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_a_refused_identity_not_a_timeout() {
    let server = Pump::start_with(&["--login", LOGIN]).await;
    let client = client_as(&server.endpoint, operator("not-the-password"));
    let why = wait_reason(&client, "Bad_UserAccessDenied").await;
    assert!(
        why.contains("refused the identity user \"operator\"") && why.contains("password"),
        "{why}"
    );
    assert!(!why.contains("not-the-password"), "{why}");
    let err = client.read(&[pump("Speed")]).await.unwrap_err();
    assert_eq!(classify(&err), Class::Offline, "{err}");
    assert!(err.to_string().contains("Bad_UserAccessDenied"), "{err}");
    let refused = closedloop_opcua::write_error(&err, "writing Speed");
    assert_eq!(refused.code, closedloop_contract::ErrorCode::DeviceOffline);
    assert!(
        refused.detail.contains("refused the identity"),
        "{}",
        refused.detail
    );
    assert!(!format!("{refused:?}").contains("not-the-password"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anonymous_session_on_a_login_server_is_told_to_give_a_user() {
    let server = Pump::start_with(&["--login", LOGIN]).await;
    let client = client_as(&server.endpoint, Identity::Anonymous);
    let why = wait_reason(&client, "refused the anonymous identity").await;
    assert!(
        why.starts_with("Bad_IdentityTokenRejected") && why.contains("add username and password"),
        "{why}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_over_a_signed_and_encrypted_channel_reads_writes_and_refuses_a_wrong_password() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, secure) = server_certificate(dir.path());
    let server = Pump::start_with(&["--login", LOGIN, "--secure", &secure]).await;
    let secured = |password: &str| {
        let mut config = closedloop_opcua::OpcuaConfig {
            identity: operator(password),
            ..quick(&server.endpoint)
        };
        config.request_timeout = Duration::from_secs(5);
        config.security = closedloop_opcua::Security::Basic256Sha256 {
            mode: closedloop_opcua::SecurityMode::SignAndEncrypt,
            server_cert: cert.clone(),
            client_cert: None,
            client_key: None,
            pki_dir: dir.path().join("pki"),
        };
        OpcuaClient::connect(config).expect("a valid config")
    };
    let client = secured("s3cret-pw");
    wait_session(&client, true).await;
    client
        .write(&pump("Speed"), Value::Number(750.0))
        .await
        .unwrap_or_else(|e| panic!("write as operator: {e}\n{}", server.stderr()));
    // Read back from asyncua's address space: the server took the value.
    let read = client.read(&[pump("Speed")]).await.expect("read back");
    assert_eq!(read[0].value, Some(Value::Number(750.0)), "{:?}", read[0]);
    let refused = secured("not-the-password");
    let why = wait_reason(&refused, "Bad_UserAccessDenied").await;
    assert!(
        why.contains("refused the identity user \"operator\""),
        "{why}"
    );
    assert!(!why.contains("not-the-password"), "{why}");
}
