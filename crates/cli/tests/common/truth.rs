//! Ground truth in the tests that run the Modbus workshop `closedloop sim` serves: its
//! registers read with Modbus requests written here, byte by byte, not with the driver under
//! test, so what a gateway reports can be checked against what the simulator holds.

use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Reads `count` registers of `unit` from the simulator with Modbus function `function`
/// (2 discrete inputs, 3 holding registers), written byte by byte here.
pub async fn modbus_read(addr: &str, unit: u8, function: u8, start: u16, count: u16) -> Vec<u8> {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let [sh, sl] = start.to_be_bytes();
    let [ch, cl] = count.to_be_bytes();
    s.write_all(&[0, 7, 0, 0, 0, 6, unit, function, sh, sl, ch, cl])
        .await
        .unwrap();
    let mut head = [0u8; 9];
    s.read_exact(&mut head).await.unwrap();
    assert_eq!(head[7], function, "a Modbus exception: {head:?}");
    let mut data = vec![0u8; head[8] as usize];
    s.read_exact(&mut data).await.unwrap();
    data
}

/// The slide's position in mm, from holding registers 2–3 (i32, 0.01 mm).
pub async fn slide_mm(addr: &str) -> f64 {
    let d = modbus_read(addr, 2, 3, 2, 2).await;
    f64::from(i32::from_be_bytes([d[0], d[1], d[2], d[3]])) * 0.01
}

/// Waits (bounded) until the slide reads beyond `mm`.
pub async fn slide_beyond(modbus: &str, mm: f64) {
    for _ in 0..150 {
        if slide_mm(modbus).await > mm {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the slide never passed {mm} mm");
}

/// The slide's position once it has stood still for 300 ms (bounded: 10 s).
pub async fn slide_at_rest(modbus: &str) -> f64 {
    let mut last = slide_mm(modbus).await;
    for _ in 0..33 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = slide_mm(modbus).await;
        if (now - last).abs() < 0.01 {
            return now;
        }
        last = now;
    }
    panic!("the slide never came to rest");
}
