//! The simulator over real Modbus TCP, driven by a client no one here wrote (tokio-modbus): the
//! register maps and physics of docs/simulator.md, exceptions as exception responses, silence as
//! silence on an open connection, and several units behind one listener.

use closedloop_sim::{Fault, FaultKind, FaultSpec, SimConfig, SimDevice};
use closedloop_sim_server::{ModbusServer, Units};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::time::{Instant, timeout};
use tokio_modbus::client::{Context, Reader, Writer, tcp};
use tokio_modbus::slave::SlaveContext;
use tokio_modbus::{ExceptionCode, Slave};

/// Long enough for any answer on a loaded machine; only awaited in full when nothing answers.
const ANSWER: Duration = Duration::from_secs(5);
/// How long a silent device is given to prove it stays silent.
const SILENCE: Duration = Duration::from_millis(300);

fn device(model: &str, tweak: impl FnOnce(&mut SimConfig)) -> SimDevice {
    let mut cfg = SimConfig {
        model: model.into(),
        ..SimConfig::default()
    };
    tweak(&mut cfg);
    SimDevice::from_config(&cfg).expect("a valid sim table")
}

/// Serves `units` on 127.0.0.1:0 for the rest of the test; the port accepts before this returns.
async fn serve(units: Units) -> SocketAddr {
    let server = ModbusServer::bind("127.0.0.1:0".parse().unwrap(), units)
        .await
        .unwrap();
    let addr = server.local_addr().unwrap();
    tokio::spawn(server.run());
    addr
}

async fn client(addr: SocketAddr, unit: u8) -> Context {
    tcp::connect_slave(addr, Slave(unit)).await.unwrap()
}

/// Polls `read` until `done` holds, failing after `ANSWER`.
async fn eventually<T: std::fmt::Debug>(
    ctx: &mut Context,
    mut read: impl AsyncFnMut(&mut Context) -> T,
    done: impl Fn(&T) -> bool,
) -> T {
    let deadline = Instant::now() + ANSWER;
    loop {
        let value = read(ctx).await;
        if done(&value) {
            return value;
        }
        assert!(Instant::now() < deadline, "never reached: last {value:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn relay_contact_follows_the_coil_after_pull_in() {
    let relay = device("relay", |c| c.pull_in_ms = Some(500));
    let addr = serve(Units::from([(1, relay)])).await;
    let mut ctx = client(addr, 1).await;
    ctx.write_single_coil(0, true).await.unwrap().unwrap();
    assert_eq!(ctx.read_coils(0, 1).await.unwrap(), Ok(vec![true]));
    // Commanded, not yet switched.
    assert_eq!(
        ctx.read_discrete_inputs(0, 1).await.unwrap(),
        Ok(vec![false])
    );
    let contact = eventually(
        &mut ctx,
        async |c| c.read_discrete_inputs(0, 1).await.unwrap(),
        |v| *v == Ok(vec![true]),
    )
    .await;
    assert_eq!(contact, Ok(vec![true]));
}

#[tokio::test]
async fn stepper_moves_to_a_target_written_with_fc16() {
    let slide = device("stepper", |_| {});
    let addr = serve(Units::from([(1, slide)])).await;
    let mut ctx = client(addr, 1).await;
    // 10.00 mm, i32 high word first.
    ctx.write_multiple_registers(0, &[0, 1000])
        .await
        .unwrap()
        .unwrap();
    ctx.write_single_coil(0, true).await.unwrap().unwrap();
    assert_eq!(
        ctx.read_discrete_inputs(0, 1).await.unwrap(),
        Ok(vec![true])
    );
    let arrived = eventually(
        &mut ctx,
        async |c| {
            let pos = c.read_holding_registers(2, 2).await.unwrap().unwrap();
            let moving = c.read_discrete_inputs(0, 2).await.unwrap().unwrap();
            (pos, moving)
        },
        |(pos, moving)| pos == &[0, 1000] && !moving[0],
    )
    .await;
    assert_eq!(arrived.1, vec![false, false], "no fault");
}

#[tokio::test]
async fn a_target_outside_travel_is_exception_3() {
    let slide = device("stepper", |c| c.travel_mm = Some([0.0, 300.0]));
    let addr = serve(Units::from([(1, slide)])).await;
    let mut ctx = client(addr, 1).await;
    let answer = ctx.write_multiple_registers(0, &[0, 40000]).await.unwrap();
    assert_eq!(answer, Err(ExceptionCode::IllegalDataValue));
}

#[tokio::test]
async fn nak_is_exception_4_and_clearing_it_brings_answers_back() {
    let lamp = device("relay", |_| {});
    let addr = serve(Units::from([(1, lamp.clone())])).await;
    let mut ctx = client(addr, 1).await;
    lamp.inject(FaultSpec::now(Fault::Nak));
    let answer = ctx.read_discrete_inputs(0, 1).await.unwrap();
    assert_eq!(answer, Err(ExceptionCode::ServerDeviceFailure));
    lamp.clear(FaultKind::Nak);
    assert_eq!(
        ctx.read_discrete_inputs(0, 1).await.unwrap(),
        Ok(vec![false])
    );
}

#[tokio::test]
async fn power_off_at_run_time_is_silence_on_an_open_connection_until_cleared() {
    let lamp = device("relay", |_| {});
    let addr = serve(Units::from([(1, lamp.clone())])).await;
    let mut ctx = client(addr, 1).await;
    assert_eq!(ctx.read_coils(0, 1).await.unwrap(), Ok(vec![false]));
    lamp.inject(FaultSpec::now(Fault::PowerOff));
    let silent = timeout(SILENCE, ctx.read_coils(0, 1)).await;
    assert!(silent.is_err(), "a powered-off unit answered: {silent:?}");
    lamp.clear(FaultKind::PowerOff);
    // Same connection: it stayed open, and the lost request does not hold the next one back.
    let answer = timeout(ANSWER, ctx.read_coils(0, 1)).await;
    assert_eq!(answer.expect("answers again").unwrap(), Ok(vec![false]));
}

#[tokio::test]
async fn zombie_accepts_connections_and_answers_nothing() {
    let lamp = device("relay", |_| {});
    lamp.inject(FaultSpec::now(Fault::Zombie));
    let addr = serve(Units::from([(1, lamp)])).await;
    let mut ctx = client(addr, 1).await;
    assert!(timeout(SILENCE, ctx.read_coils(0, 1)).await.is_err());
}

#[tokio::test]
async fn crc_error_applies_the_request_and_drops_the_connection() {
    let lamp = device("relay", |_| {});
    let addr = serve(Units::from([(1, lamp.clone())])).await;
    let mut ctx = client(addr, 1).await;
    lamp.inject(FaultSpec::now(Fault::CrcError));
    let answer = timeout(ANSWER, ctx.write_single_coil(0, true)).await;
    assert!(answer.expect("no silence").is_err(), "a transport error");
    assert_eq!(lamp.peek().coils, vec![true], "the write took effect");
}

#[tokio::test]
async fn an_unknown_unit_is_exception_0x0b() {
    let lamp = device("relay", |_| {});
    let addr = serve(Units::from([(1, lamp)])).await;
    let mut ctx = client(addr, 9).await;
    let answer = ctx.read_coils(0, 1).await.unwrap();
    assert_eq!(answer, Err(ExceptionCode::GatewayTargetDevice));
}

#[tokio::test]
async fn two_units_share_one_listener_and_one_connection() {
    let lamp = device("relay", |_| {});
    let thermometer = device("sensor", |c| c.value = Some(42.0));
    let addr = serve(Units::from([(1, lamp), (2, thermometer)])).await;
    let mut ctx = client(addr, 1).await;
    ctx.write_single_coil(0, true).await.unwrap().unwrap();
    assert_eq!(ctx.read_coils(0, 1).await.unwrap(), Ok(vec![true]));
    ctx.set_slave(Slave(2));
    assert_eq!(ctx.read_input_registers(0, 1).await.unwrap(), Ok(vec![420]));
    // The sensor has no coils.
    let answer = ctx.read_coils(0, 1).await.unwrap();
    assert_eq!(answer, Err(ExceptionCode::IllegalDataAddress));
}

#[tokio::test]
async fn a_silent_unit_does_not_hold_back_another_units_answers() {
    let lamp = device("relay", |_| {});
    let thermometer = device("sensor", |c| c.value = Some(42.0));
    lamp.inject(FaultSpec::now(Fault::PowerOff));
    let addr = serve(Units::from([(1, lamp), (2, thermometer)])).await;
    let mut ctx = client(addr, 1).await;
    assert!(timeout(SILENCE, ctx.read_coils(0, 1)).await.is_err());
    ctx.set_slave(Slave(2));
    let answer = timeout(ANSWER, ctx.read_input_registers(0, 1)).await;
    assert_eq!(answer.expect("unit 2 answers").unwrap(), Ok(vec![420]));
}
