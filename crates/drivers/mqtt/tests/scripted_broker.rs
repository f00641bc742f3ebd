//! A scripted broker that misbehaves: it never acknowledges a publish, then drops the connection.
//! The publish must fail `Disconnected` and must not be re-sent after the reconnect (a
//! non-idempotent action is never blindly re-sent, docs/architecture.md).

use std::time::Duration;

use closedloop_mqtt::{BrokerConfig, Connection, Error, MqttBroker};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Reads one MQTT packet; returns its type nibble (3 = PUBLISH, 1 = CONNECT, ...).
async fn read_packet(s: &mut TcpStream) -> std::io::Result<u8> {
    let first = s.read_u8().await?;
    let (mut len, mut shift) = (0usize, 0);
    loop {
        let b = s.read_u8().await?;
        len |= usize::from(b & 0x7f) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            break;
        }
    }
    let mut body = vec![0; len];
    s.read_exact(&mut body).await?;
    Ok(first >> 4)
}

/// Accepts a client and answers its CONNECT with a v5 CONNACK (success, no properties).
async fn accept(listener: &TcpListener) -> TcpStream {
    let (mut s, _) = listener.accept().await.expect("accept");
    assert_eq!(read_packet(&mut s).await.expect("CONNECT"), 1);
    s.write_all(&[0x20, 0x03, 0x00, 0x00, 0x00])
        .await
        .expect("CONNACK");
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unacked_publish_fails_disconnected_and_is_not_resent() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("mqtt://{}", listener.local_addr().expect("addr"));
    let broker = MqttBroker::connect(BrokerConfig::new(url, "device")).expect("config");
    let mut first = accept(&listener).await;
    let mut connection = broker.connection();
    tokio::time::timeout(
        Duration::from_secs(5),
        connection.wait_for(|l| *l == Connection::Connected),
    )
    .await
    .expect("connected")
    .expect("connection watch open");

    let publish = {
        let broker = broker.clone();
        tokio::spawn(async move {
            broker
                .publish("lab/lamp/set", "on", 1, Duration::from_secs(30))
                .await
        })
    };
    assert_eq!(read_packet(&mut first).await.expect("PUBLISH"), 3);
    // No PUBACK: the publish stays pending...
    tokio::task::yield_now().await;
    assert!(!publish.is_finished(), "no PUBACK, no result");
    // ...until the broker goes away.
    drop(first);
    let r = tokio::time::timeout(Duration::from_secs(5), publish)
        .await
        .expect("resolves")
        .expect("task");
    assert_eq!(r, Err(Error::Disconnected));

    // After the reconnect the broker sees no PUBLISH again.
    let mut second = accept(&listener).await;
    let resent = tokio::time::timeout(Duration::from_millis(500), async {
        loop {
            match read_packet(&mut second).await {
                Ok(3) => return true,
                Ok(_) => continue,
                Err(_) => return false,
            }
        }
    })
    .await;
    assert!(
        !matches!(resent, Ok(true)),
        "the unacknowledged publish was re-sent"
    );
}
