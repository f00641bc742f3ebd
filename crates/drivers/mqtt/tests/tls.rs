//! `mqtts://` against a real Mosquitto with a TLS listener, and username/password: a throwaway
//! PKI made by the `openssl` CLI for every test (missing `openssl` fails the test, never skips it).

use std::path::Path;
use std::time::Duration;

use closedloop_mqtt::testing::{
    Listener, Mosquitto, TestPki, await_active, connected, next, password_file,
};
use closedloop_mqtt::{BrokerConfig, Connection, Error, MqttBroker};

fn pki() -> (tempfile::TempDir, TestPki) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let pki = TestPki::generate(dir.path());
    (dir, pki)
}

async fn tls_broker(pki: &TestPki, require_certificate: bool) -> Mosquitto {
    Mosquitto::start_with(Listener {
        tls: Some(pki.server()),
        require_certificate,
        ..Listener::default()
    })
    .await
}

fn config(m: &Mosquitto, id: &str, ca: &Path) -> BrokerConfig {
    let mut c = BrokerConfig::new(&m.url, id);
    c.tls.ca_file = Some(ca.to_path_buf());
    c
}

/// Connects and waits for two failed attempts in a row (the connection is re-announced
/// `Disconnected` after each), showing it never came up; returns the handle and why it is down.
async fn never_connects(config: BrokerConfig) -> (MqttBroker, String) {
    let broker = MqttBroker::connect(config).expect("valid config");
    let mut connection = broker.connection();
    for _ in 0..2 {
        tokio::time::timeout(Duration::from_secs(10), connection.changed())
            .await
            .expect("a connection attempt ends within 10 s")
            .expect("connection watch open");
        assert_eq!(*connection.borrow_and_update(), Connection::Disconnected);
    }
    assert_eq!(
        broker
            .publish("lab/x", "1", 1, Duration::from_secs(1))
            .await,
        Err(Error::Disconnected)
    );
    let why = broker
        .last_error()
        .expect("the reason the connection is down");
    (broker, why)
}

/// Publishes on one TLS client and receives on another.
async fn round_trip(publisher: &MqttBroker, reader: &MqttBroker, topic: &str) {
    let mut sub = reader.subscribe(topic);
    await_active(reader, &mut sub, topic).await;
    publisher
        .publish(topic, "over tls", 1, Duration::from_secs(5))
        .await
        .expect("acked over TLS");
    assert_eq!(next(&mut sub).await.payload.as_ref(), b"over tls");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_and_subscribe_over_mqtts_with_ca_file() {
    let (_dir, pki) = pki();
    let m = tls_broker(&pki, false).await;
    assert!(m.url.starts_with("mqtts://127.0.0.1:"), "{}", m.url);
    let a = connected(config(&m, "a", &pki.ca)).await;
    let b = connected(config(&m, "b", &pki.ca)).await;
    assert_eq!(a.last_error(), None);
    round_trip(&a, &b, "lab/tls").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssl_scheme_is_tls_too() {
    let (_dir, pki) = pki();
    let m = tls_broker(&pki, false).await;
    let mut c = config(&m, "ssl", &pki.ca);
    c.url = m.url.replace("mqtts://", "ssl://");
    connected(c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_ca_never_connects_and_says_why() {
    let (_dir, pki) = pki();
    let m = tls_broker(&pki, false).await;
    let (_b, why) = never_connects(config(&m, "wrong-ca", &pki.other_ca)).await;
    assert!(why.contains("UnknownIssuer"), "{why}");
    assert!(
        why.contains("ca_file"),
        "the hint names the key to check: {why}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_system_roots_do_not_trust_a_private_ca() {
    let (_dir, pki) = pki();
    let m = tls_broker(&pki, false).await;
    let (_b, why) = never_connects(BrokerConfig::new(&m.url, "system-roots")).await;
    assert!(why.contains("UnknownIssuer"), "{why}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_for_another_host_never_connects() {
    let (_dir, pki) = pki();
    let mut server = pki.server();
    server.cert = pki.misnamed_cert.clone();
    server.key = pki.misnamed_key.clone();
    let m = Mosquitto::start_with(Listener {
        tls: Some(server),
        ..Listener::default()
    })
    .await;
    let (_b, why) = never_connects(config(&m, "misnamed", &pki.ca)).await;
    assert!(
        why.contains("not valid for name \"127.0.0.1\"") && why.contains("elsewhere.invalid"),
        "{why}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_with_the_client_certificate_works() {
    let (_dir, pki) = pki();
    let m = tls_broker(&pki, true).await;
    let with_cert = |id: &str| {
        let mut c = config(&m, id, &pki.ca);
        c.tls.client_cert = Some(pki.client_cert.clone());
        c.tls.client_key = Some(pki.client_key.clone());
        c
    };
    let a = connected(with_cert("a")).await;
    let b = connected(with_cert("b")).await;
    round_trip(&a, &b, "lab/mtls").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_without_a_client_certificate_is_refused() {
    let (_dir, pki) = pki();
    let m = tls_broker(&pki, true).await;
    let (_b, why) = never_connects(config(&m, "anonymous", &pki.ca)).await;
    assert!(why.contains("CertificateRequired"), "{why}");
    assert!(why.contains("set client_cert and client_key"), "{why}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sec1_and_pkcs1_client_keys_are_accepted() {
    let (dir, pki) = pki();
    // The same EC key in SEC1 form ("BEGIN EC PRIVATE KEY").
    pki.openssl("ec -in client.key -out client-sec1.key");
    // An RSA client certificate with its key in PKCS#1 form ("BEGIN RSA PRIVATE KEY").
    pki.openssl("req -new -newkey rsa:2048 -nodes -subj /CN=rsa -keyout rsa.key -out rsa.csr");
    pki.openssl(
        "x509 -req -in rsa.csr -CA ca.pem -CAkey ca.key -set_serial 9 -days 2 \
         -extfile openssl.cnf -extensions client -out rsa.pem",
    );
    pki.openssl("rsa -in rsa.key -traditional -out rsa-pkcs1.key");
    let m = tls_broker(&pki, true).await;
    for (id, cert, key, marker) in [
        (
            "sec1",
            "client.pem",
            "client-sec1.key",
            "BEGIN EC PRIVATE KEY",
        ),
        ("pkcs1", "rsa.pem", "rsa-pkcs1.key", "BEGIN RSA PRIVATE KEY"),
    ] {
        let key = dir.path().join(key);
        let text = std::fs::read_to_string(&key).expect("key written");
        assert!(text.contains(marker), "{id}: {text}");
        let mut c = config(&m, id, &pki.ca);
        c.tls.client_cert = Some(dir.path().join(cert));
        c.tls.client_key = Some(key);
        connected(c).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn username_and_password_over_tls() {
    let (dir, pki) = pki();
    let m = Mosquitto::start_with(Listener {
        tls: Some(pki.server()),
        password_file: Some(password_file(dir.path(), "closedloop", "s3cret")),
        ..Listener::default()
    })
    .await;
    let with = |id: &str, user: Option<&str>, password: &str| {
        let mut c = config(&m, id, &pki.ca);
        c.username = user.map(str::to_string);
        c.password = Some(password.to_string());
        c
    };
    let ok = connected(with("right", Some("closedloop"), "s3cret")).await;
    // Accepted by the broker (nobody subscribes: "No matching subscribers" is still a PUBACK).
    (ok.send("lab/auth", "1".into(), 1, Some(5), false))
        .await
        .expect("acked");
    let (_b, why) = never_connects(with("wrong", Some("closedloop"), "guess")).await;
    assert!(
        why.contains("refused") && why.contains("username and password"),
        "{why}"
    );
    let (_b, why) = never_connects(with("nobody", None, "")).await;
    assert!(why.contains("refused"), "{why}");
}

/// Problems with the TLS files are found when connecting starts, each naming key and file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_tls_files_are_refused_before_connecting() {
    let (dir, pki) = pki();
    // Nothing listens here: these configs must fail before any connection is tried.
    let url = "mqtts://127.0.0.1:9";
    let refused = |c: BrokerConfig| match MqttBroker::connect(c) {
        Err(Error::Tls(why)) => why,
        Err(other) => panic!("not a TLS error: {other}"),
        Ok(_) => panic!("accepted"),
    };
    let base = |ca: &Path| {
        let mut c = BrokerConfig::new(url, "files");
        c.tls.ca_file = Some(ca.to_path_buf());
        c
    };

    let missing = dir.path().join("missing.pem");
    let why = refused(base(&missing));
    assert!(
        why.contains("ca_file") && why.contains("missing.pem") && why.contains("cannot be read"),
        "{why}"
    );

    let why = refused(base(&pki.client_key));
    assert!(
        why.contains("client.key") && why.contains("no certificate"),
        "{why}"
    );

    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "-----BEGIN CERTIFICATE-----\nnot base64!\n").expect("write");
    let why = refused(base(&garbage));
    assert!(
        why.contains("garbage.pem") && why.contains("not valid PEM"),
        "{why}"
    );

    let mut c = base(&pki.ca);
    c.tls.client_cert = Some(pki.client_cert.clone());
    let why = refused(c);
    assert!(why.contains("client_key"), "{why}");

    let mut c = base(&pki.ca);
    c.tls.client_cert = Some(pki.client_cert.clone());
    c.tls.client_key = Some(pki.client_cert.clone());
    let why = refused(c);
    assert!(
        why.contains("client_key") && why.contains("client.pem") && why.contains("no private key"),
        "{why}"
    );

    let mut c = base(&pki.ca);
    c.tls.client_cert = Some(pki.client_cert.clone());
    c.tls.client_key = Some(pki.server_key.clone());
    let why = refused(c);
    assert!(
        why.contains("client.pem") && why.contains("server.key"),
        "a key of another certificate: {why}"
    );

    let mut c = base(&pki.ca);
    c.url = "mqtt://127.0.0.1:9".into();
    let why = refused(c);
    assert!(why.contains("ca_file") && why.contains("mqtts://"), "{why}");

    let mut good = base(&pki.ca);
    good.tls.client_cert = Some(pki.client_cert.clone());
    good.tls.client_key = Some(pki.client_key.clone());
    MqttBroker::connect(good).expect("good files are accepted");
}
