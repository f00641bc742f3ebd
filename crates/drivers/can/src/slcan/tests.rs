//! Tests of the slcan bus task against a scripted adapter on an in-memory stream.

use super::*;
use crate::frame::Frame;
use tokio::io::{AsyncBufReadExt, BufReader, DuplexStream, duplex};

/// Reads one `\r`-terminated line the host wrote.
async fn line(r: &mut BufReader<DuplexStream>) -> String {
    let mut l = Vec::new();
    r.read_until(b'\r', &mut l).await.unwrap();
    String::from_utf8(l).unwrap()
}

/// Plays the adapter through the opening handshake; returns its reader.
async fn adapter_opens(theirs: DuplexStream) -> BufReader<DuplexStream> {
    let mut r = BufReader::new(theirs);
    assert_eq!(line(&mut r).await, "C\r");
    r.get_mut().write_all(b"\x07").await.unwrap();
    assert_eq!(line(&mut r).await, "S6\r");
    r.get_mut().write_all(b"\r").await.unwrap();
    assert_eq!(line(&mut r).await, "O\r");
    r.get_mut().write_all(b"\r").await.unwrap();
    r
}

#[tokio::test]
async fn opens_sends_and_receives() {
    let (ours, theirs) = duplex(4096);
    let adapter = tokio::spawn(async move {
        let mut r = adapter_opens(theirs).await;
        assert_eq!(line(&mut r).await, "t123111\r");
        // Noise, a received frame split around the ack, then the ack (Lawicel's `z`).
        r.get_mut().write_all(b"junk\rt3210").await.unwrap();
        r.get_mut().write_all(b"\rz\r").await.unwrap();
        assert_eq!(line(&mut r).await, "t124122\r");
        r.get_mut().write_all(b"\x07").await.unwrap();
        r
    });
    let bus = CanBus::slcan("test", ours, 500_000).await.unwrap();
    let mut frames = bus.frames();
    bus.send(Frame::data(0x123, false, [0x11])).await.unwrap();
    assert_eq!(frames.next().await.unwrap(), Frame::data(0x321, false, []));
    let e = bus
        .send(Frame::data(0x124, false, [0x22]))
        .await
        .unwrap_err();
    assert_eq!(e.to_string(), "test: the adapter refused frame t124122");
    let stats = bus.stats();
    assert_eq!((stats.received, stats.sent, stats.line_errors), (1, 1, 1));
    let _r = adapter.await.unwrap();
}

#[tokio::test]
async fn a_refused_bitrate_fails_the_open() {
    let (ours, theirs) = duplex(4096);
    tokio::spawn(async move {
        let mut r = BufReader::new(theirs);
        assert_eq!(line(&mut r).await, "C\r");
        r.get_mut().write_all(b"\r").await.unwrap();
        assert_eq!(line(&mut r).await, "S8\r");
        r.get_mut().write_all(b"\x07").await.unwrap();
        r
    });
    let e = CanBus::slcan("test", ours, 1_000_000).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "test: the adapter refused the bitrate command S8"
    );
}

#[tokio::test]
async fn unknown_bitrates_are_refused_before_any_io() {
    let (ours, _theirs) = duplex(64);
    assert_eq!(
        CanBus::slcan("test", ours, 83_333).await.unwrap_err(),
        BusError::Bitrate(83_333)
    );
}

#[tokio::test(start_paused = true)]
async fn a_silent_device_is_no_adapter() {
    let (ours, _theirs) = duplex(4096);
    let e = CanBus::slcan("test", ours, 500_000).await.unwrap_err();
    assert!(matches!(e, BusError::NoAnswer { .. }), "{e}");
    assert!(e.to_string().contains("is it an slcan adapter?"), "{e}");
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_frame_closes_the_link() {
    let (ours, theirs) = duplex(4096);
    let adapter = tokio::spawn(async move {
        let mut r = adapter_opens(theirs).await;
        line(&mut r).await;
        r // then silence, with the port still open
    });
    let bus = CanBus::slcan("test", ours, 500_000).await.unwrap();
    let e = bus.send(Frame::data(1, false, [])).await.unwrap_err();
    assert!(matches!(e, BusError::NoAnswer { .. }), "{e}");
    let later = bus.send(Frame::data(1, false, [])).await.unwrap_err();
    assert_eq!(later, e);
    assert_eq!(bus.closed(), Some(e.clone()));
    assert_eq!(bus.frames().next().await.unwrap_err(), e);
    drop(adapter);
}

#[tokio::test]
async fn a_vanished_port_ends_receivers_and_senders() {
    let (ours, theirs) = duplex(4096);
    let adapter = tokio::spawn(adapter_opens(theirs));
    let bus = CanBus::slcan("test", ours, 500_000).await.unwrap();
    let mut frames = bus.frames();
    drop(adapter.await.unwrap());
    let e = frames.next().await.unwrap_err();
    assert!(
        e.to_string()
            .starts_with("test: link closed: the port reached end of file"),
        "{e}"
    );
    assert_eq!(bus.send(Frame::data(1, false, [])).await.unwrap_err(), e);
}

#[tokio::test]
async fn invalid_frames_are_refused_without_reaching_the_adapter() {
    let (ours, theirs) = duplex(4096);
    let adapter = tokio::spawn(adapter_opens(theirs));
    let bus = CanBus::slcan("test", ours, 500_000).await.unwrap();
    let e = bus.send(Frame::data(0x800, false, [])).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "id 0x800 does not fit an 11-bit standard identifier"
    );
    drop(adapter);
}
