//! Basic256Sha256 against the sim server: signed and encrypted sessions with the server's
//! certificate pinned from a file, and a server presenting any other certificate refused.

mod opcua_devices;

use std::time::Duration;

use closedloop_contract::Value;
use closedloop_opcua::{OpcuaClient, Security, SecurityMode, SessionState};
use closedloop_sim_server::opcua_sim::{SimOptions, SimServer};
use opcua_devices::*;

async fn secure_server(pki: &std::path::Path) -> SimServer {
    let options = SimOptions {
        pki_dir: Some(pki.to_path_buf()),
        ..SimOptions::default()
    };
    let devices = vec![("lamp".to_string(), relay())];
    SimServer::start_with("127.0.0.1:0".parse().unwrap(), devices, options)
        .await
        .expect("secure sim server")
}

fn secure_client(
    server: &SimServer,
    pin: &std::path::Path,
    mode: SecurityMode,
    pki: &std::path::Path,
) -> OpcuaClient {
    let mut cfg = quick(server.endpoint_url());
    cfg.request_timeout = Duration::from_secs(5);
    cfg.security = Security::Basic256Sha256 {
        mode,
        server_cert: pin.to_path_buf(),
        client_cert: None,
        client_key: None,
        pki_dir: pki.to_path_buf(),
    };
    OpcuaClient::connect(cfg).expect("valid config")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn basic256sha256_connects_with_the_pinned_certificate_and_refuses_another() {
    let dir = tempfile::tempdir().unwrap();
    let t0 = std::time::Instant::now();
    let server = secure_server(&dir.path().join("server-a")).await;
    let other = secure_server(&dir.path().join("server-b")).await;
    eprintln!("two server certificates in {:?}", t0.elapsed());
    let pin = server.server_cert().expect("a certificate").to_path_buf();
    let client_pki = dir.path().join("client");

    for mode in [SecurityMode::SignAndEncrypt, SecurityMode::Sign] {
        let client = secure_client(&server, &pin, mode, &client_pki);
        wait_session(&client, true).await;
        let commanded = node("lamp", "Commanded");
        client
            .write(&commanded, Value::Bool(true))
            .await
            .expect("secure write");
        let read = client.read(&[commanded]).await.expect("secure read");
        assert_eq!(read[0].value, Some(Value::Bool(true)), "{mode:?}");
    }
    eprintln!("with client sessions after {:?}", t0.elapsed());

    // The same pin against a server with another certificate: never a session.
    let client = secure_client(&other, &pin, SecurityMode::SignAndEncrypt, &client_pki);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let state = client.session_state().borrow().clone();
    let SessionState::Disconnected(why) = state else {
        panic!("a server with another certificate was accepted");
    };
    assert!(why.starts_with("Bad_"), "{why}");
    eprintln!("refused: {why}");
    drop(client);

    // That server is fine with its own certificate pinned: the refusal was the pin.
    let own = other.server_cert().expect("a certificate").to_path_buf();
    let client = secure_client(&other, &own, SecurityMode::Sign, &client_pki);
    wait_session(&client, true).await;
}
