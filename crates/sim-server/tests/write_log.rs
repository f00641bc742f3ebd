//! The simulator's write log over real Modbus TCP, written to by a client no one here wrote
//! (tokio-modbus) on two connections: each write is one line naming the connection it came on,
//! the unit and device, and the words or bits; reads, and writes to a unit nobody serves, are not
//! logged; a write a powered-off device never answers is.

use closedloop_sim::{Fault, FaultSpec, SimConfig, SimDevice};
use closedloop_sim_server::{ModbusServer, Units, WriteLog};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_modbus::client::{Context, Reader, Writer, tcp};
use tokio_modbus::slave::SlaveContext;
use tokio_modbus::{ExceptionCode, Slave};

fn device(model: &str) -> SimDevice {
    let cfg = SimConfig {
        model: model.into(),
        ..SimConfig::default()
    };
    SimDevice::from_config(&cfg).expect("a valid sim table")
}

/// Serves a relay `lamp` as unit 1 and a stepper `slide` as unit 2, logging writes to `log`.
async fn serve(log: &Path, lamp: SimDevice) -> SocketAddr {
    let units = Units::from([(1, lamp), (2, device("stepper"))]);
    let mut server = ModbusServer::bind("127.0.0.1:0".parse().unwrap(), units)
        .await
        .unwrap();
    server.name_units(BTreeMap::from([(1, "lamp".into()), (2, "slide".into())]));
    server.log_writes(WriteLog::open(log).unwrap());
    let addr = server.local_addr().unwrap();
    tokio::spawn(server.run());
    addr
}

/// A tokio-modbus client on a connection of its own, and that connection's local address.
async fn client(addr: SocketAddr, unit: u8) -> (Context, String) {
    let stream = TcpStream::connect(addr).await.unwrap();
    let local = stream.local_addr().unwrap().to_string();
    (tcp::attach_slave(stream, Slave(unit)), local)
}

fn lines(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn each_write_is_logged_with_the_connection_it_came_on() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("writes.jsonl");
    let addr = serve(&log, device("relay")).await;
    let (mut lamp, lamp_peer) = client(addr, 1).await;
    let (mut slide, slide_peer) = client(addr, 2).await;
    lamp.write_single_coil(0, true).await.unwrap().unwrap();
    slide
        .write_multiple_registers(0, &[0, 5000])
        .await
        .unwrap()
        .unwrap();
    lamp.read_coils(0, 1).await.unwrap().unwrap();
    slide.read_holding_registers(0, 2).await.unwrap().unwrap();
    slide.set_slave(Slave(9));
    let nobody = slide.write_single_register(0, 1).await.unwrap();
    assert_eq!(nobody, Err(ExceptionCode::GatewayTargetDevice));

    let logged = lines(&log);
    assert_eq!(logged.len(), 2, "{logged:?}");
    let (coil, words) = (&logged[0], &logged[1]);
    assert_eq!(coil["peer"], lamp_peer.as_str());
    assert_eq!(coil["listen"], addr.to_string());
    assert_eq!(
        (&coil["unit"], &coil["device"], &coil["area"]),
        (&json!(1), &json!("lamp"), &json!("coil"))
    );
    assert_eq!(
        (&coil["start"], &coil["values"]),
        (&json!(0), &json!([true]))
    );
    assert_eq!(words["peer"], slide_peer.as_str());
    assert_eq!(
        (&words["unit"], &words["device"], &words["area"]),
        (&json!(2), &json!("slide"), &json!("holding"))
    );
    assert_eq!(words["values"], json!([0, 5000]));
    assert!(
        words["at_ms"].as_i64() >= coil["at_ms"].as_i64(),
        "{logged:?}"
    );
}

#[tokio::test]
async fn a_write_a_powered_off_device_never_answers_is_logged() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("writes.jsonl");
    let lamp = device("relay");
    lamp.inject(FaultSpec::now(Fault::PowerOff));
    let addr = serve(&log, lamp).await;
    let (mut ctx, peer) = client(addr, 1).await;
    let silent = tokio::time::timeout(Duration::from_millis(300), ctx.write_single_coil(0, true));
    assert!(silent.await.is_err(), "a powered-off device answered");
    let logged = lines(&log);
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert_eq!(logged[0]["peer"], peer.as_str());
    assert_eq!(logged[0]["values"], json!([true]));
}
