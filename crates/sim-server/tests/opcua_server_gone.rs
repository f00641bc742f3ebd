//! The ways a simulated OPC UA server goes away under the client, over loopback: shut down
//! mid-monitor, powered off and back, a zombie that answers nothing, and a server restarted on
//! the same port, whose subscription the client re-creates.

mod opcua_devices;

use closedloop_contract::Value;
use closedloop_opcua::{Class, Monitor, Update, classify};
use closedloop_sim::{Fault, FaultKind, FaultSpec};
use closedloop_sim_server::opcua_sim::SimServer;
use opcua_devices::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_shut_down_mid_monitor_is_offline() {
    let server = serve(vec![("lamp", relay())]).await;
    let client = connect(server.endpoint_url()).await;
    let commanded = node("lamp", "Commanded");
    let mut monitor = client.monitor(std::slice::from_ref(&commanded), 20);
    next_where(&mut monitor, &commanded, |u| u.good).await;

    server.shutdown();
    let state = wait_session(&client, false).await;
    assert!(matches!(
        state,
        closedloop_opcua::SessionState::Disconnected(_)
    ));
    let err = client
        .read(std::slice::from_ref(&commanded))
        .await
        .unwrap_err();
    assert_eq!(classify(&err), Class::Offline, "{err}");
    let err = client
        .write(&commanded, Value::Bool(true))
        .await
        .unwrap_err();
    assert_eq!(classify(&err), Class::Offline, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_off_is_offline_and_power_back_resumes_the_monitor() {
    let server = serve(vec![("lamp", relay())]).await;
    let client = connect(server.endpoint_url()).await;
    let (commanded, contact) = (node("lamp", "Commanded"), node("lamp", "Contact"));
    let mut monitor = client.monitor(&[commanded.clone(), contact.clone()], 20);
    next_where(&mut monitor, &contact, |u| u.good).await;

    let lamp = server.device("lamp").unwrap().clone();
    lamp.inject(FaultSpec::now(Fault::PowerOff));
    let state = wait_session(&client, false).await;
    let err = client
        .write(&commanded, Value::Bool(true))
        .await
        .unwrap_err();
    assert_eq!(classify(&err), Class::Offline, "{err} (session {state:?})");

    lamp.clear(FaultKind::PowerOff);
    wait_session(&client, true).await;
    let ack = client
        .write(&commanded, Value::Bool(true))
        .await
        .expect("write after power back");
    // The read that resynchronises the monitor after the reconnect may be numbered before the
    // fence and still show the new state: it does not count, a later value does.
    let closed = next_where(&mut monitor, &contact, |u| {
        u.value == Some(Value::Bool(true)) && u.seq > ack.seq
    })
    .await;
    assert!(closed.good);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zombie_answers_nothing_and_is_offline() {
    let server = serve(vec![("lamp", relay())]).await;
    let client = connect(server.endpoint_url()).await;
    let commanded = node("lamp", "Commanded");
    server
        .device("lamp")
        .unwrap()
        .inject(FaultSpec::now(Fault::Zombie));
    // Give the gate one sampling period to freeze.
    tokio::time::sleep(closedloop_sim_server::opcua_sim::SAMPLE_PERIOD * 3).await;
    let err = client
        .read(std::slice::from_ref(&commanded))
        .await
        .unwrap_err();
    assert_eq!(classify(&err), Class::Offline, "{err}");
    wait_session(&client, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_gets_the_subscription_re_created() {
    let server = serve(vec![("lamp", relay())]).await;
    let addr = server.local_addr();
    let client = connect(server.endpoint_url()).await;
    let (commanded, contact) = (node("lamp", "Commanded"), node("lamp", "Contact"));
    let mut monitor = client.monitor(&[commanded.clone(), contact.clone()], 20);
    next_where(&mut monitor, &contact, |u| u.good).await;

    server.shutdown();
    wait_session(&client, false).await;
    // A new server process on the same port: no session, no subscription survives it.
    let again = async {
        loop {
            let devices = vec![("lamp".to_string(), relay())];
            match SimServer::start(addr, devices).await {
                Ok(s) => return s,
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
            }
        }
    };
    let _server = tokio::time::timeout(WAIT, again)
        .await
        .expect("rebind the port");
    wait_session(&client, true).await;
    client
        .write(&commanded, Value::Bool(true))
        .await
        .expect("write");
    // The new server's relay starts open, so a `true` the re-created subscription delivers came
    // after the write; see `subscribed_true`.
    let closed = subscribed_true(&mut monitor, &contact).await;
    assert!(closed.good);
}

/// The subscription's report of `node` turning true, on a relay that was open before the write.
/// Not a value numbered after the write's fence: right after a
/// reconnect the acknowledgement and the first publish can reach the client together, the change
/// be numbered before the writer resumes and takes the fence, and the subscription report it
/// only that once. The fence errs safe (fresh evidence dropped, never stale evidence taken), and
/// the engine reads again after every acknowledgement; the fence rule itself is
/// `a_relay_switching_is_seen_only_after_the_fence`'s.
async fn subscribed_true(monitor: &mut Monitor, node: &str) -> Update {
    next_where(monitor, node, |u| {
        u.value == Some(Value::Bool(true)) && !u.from_read
    })
    .await
}
