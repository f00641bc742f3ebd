//! The Modbus TCP driver against tokio-modbus's own TCP server, on loopback.
//!
//! The scripted server holds coils and registers per unit and can, on demand, answer every
//! request with an exception or delay its answers; it counts accepted connections and the
//! requests it is serving at once.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use closedloop_contract::{Area, Data, Driver, Exception, TransportError, Write};
use closedloop_modbus::{Connections, ModbusDevice, modbus_tcp};
use tokio::net::TcpListener;
use tokio_modbus::server::tcp::{Server, accept_tcp_connection};
use tokio_modbus::{ExceptionCode, Request, Response, SlaveRequest};

#[derive(Default, Clone)]
struct Bank {
    coils: Vec<bool>,
    discrete: Vec<bool>,
    holding: Vec<u16>,
    input: Vec<u16>,
}

impl Bank {
    /// Ten of each, with values that tell units apart.
    fn for_unit(unit: u8) -> Bank {
        let u = u16::from(unit);
        Bank {
            coils: vec![false; 10],
            discrete: (0..10)
                .map(|i| (i + unit as usize).is_multiple_of(2))
                .collect(),
            holding: (0..10).map(|i| u * 1000 + i).collect(),
            input: (0..10).map(|i| u * 100 + i).collect(),
        }
    }
}

#[derive(Default)]
struct Shared {
    units: Mutex<HashMap<u8, Bank>>,
    /// Answer every request with this exception code.
    fail: Mutex<Option<u8>>,
    /// Hold every answer this long.
    delay: Mutex<Duration>,
    accepted: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    /// (unit, function code) of every request served.
    log: Mutex<Vec<(u8, u8)>>,
}

impl Shared {
    fn set_delay(&self, d: Duration) {
        *self.delay.lock().unwrap() = d;
    }
    fn set_fail(&self, code: Option<u8>) {
        *self.fail.lock().unwrap() = code;
    }
    fn last_function(&self) -> u8 {
        self.log.lock().unwrap().last().unwrap().1
    }
    fn serve(&self, unit: u8, req: Request<'static>) -> Result<Response, ExceptionCode> {
        if let Some(code) = *self.fail.lock().unwrap() {
            return Err(ExceptionCode::new(code));
        }
        let mut units = self.units.lock().unwrap();
        let bank = units
            .get_mut(&unit)
            .ok_or(ExceptionCode::GatewayTargetDevice)?;
        let range = |len: usize, start: u16, n: usize| {
            let s = usize::from(start);
            if s + n <= len {
                Ok(s..s + n)
            } else {
                Err(ExceptionCode::IllegalDataAddress)
            }
        };
        Ok(match req {
            Request::ReadCoils(a, n) => {
                Response::ReadCoils(bank.coils[range(10, a, n.into())?].to_vec())
            }
            Request::ReadDiscreteInputs(a, n) => {
                Response::ReadDiscreteInputs(bank.discrete[range(10, a, n.into())?].to_vec())
            }
            Request::ReadHoldingRegisters(a, n) => {
                Response::ReadHoldingRegisters(bank.holding[range(10, a, n.into())?].to_vec())
            }
            Request::ReadInputRegisters(a, n) => {
                Response::ReadInputRegisters(bank.input[range(10, a, n.into())?].to_vec())
            }
            Request::WriteSingleCoil(a, v) => {
                bank.coils[range(10, a, 1)?][0] = v;
                Response::WriteSingleCoil(a, v)
            }
            Request::WriteMultipleCoils(a, vs) => {
                bank.coils[range(10, a, vs.len())?].copy_from_slice(&vs);
                Response::WriteMultipleCoils(a, vs.len() as u16)
            }
            Request::WriteSingleRegister(a, v) => {
                bank.holding[range(10, a, 1)?][0] = v;
                Response::WriteSingleRegister(a, v)
            }
            Request::WriteMultipleRegisters(a, vs) => {
                bank.holding[range(10, a, vs.len())?].copy_from_slice(&vs);
                Response::WriteMultipleRegisters(a, vs.len() as u16)
            }
            _ => return Err(ExceptionCode::IllegalFunction),
        })
    }
}

#[derive(Clone)]
struct Service(Arc<Shared>);

type Answer = Pin<Box<dyn Future<Output = Result<Response, ExceptionCode>> + Send>>;

impl tokio_modbus::server::Service for Service {
    type Request = SlaveRequest<'static>;
    type Response = Response;
    type Exception = ExceptionCode;
    type Future = Answer;

    fn call(&self, req: SlaveRequest<'static>) -> Answer {
        let shared = self.0.clone();
        Box::pin(async move {
            let now = shared.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            shared.max_in_flight.fetch_max(now, Ordering::SeqCst);
            let delay = *shared.delay.lock().unwrap();
            tokio::time::sleep(delay).await;
            let fc = req.request.function_code().value();
            shared.log.lock().unwrap().push((req.slave, fc));
            let answer = shared.serve(req.slave, req.request);
            shared.in_flight.fetch_sub(1, Ordering::SeqCst);
            answer
        })
    }
}

/// Starts the scripted server on 127.0.0.1:0 with units 1 and 2.
async fn server() -> (SocketAddr, Arc<Shared>) {
    let shared = Arc::new(Shared::default());
    for u in [1, 2] {
        shared.units.lock().unwrap().insert(u, Bank::for_unit(u));
    }
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let s = shared.clone();
    tokio::spawn(async move {
        let on_connected = move |stream, peer| {
            s.accepted.fetch_add(1, Ordering::SeqCst);
            let svc = Service(s.clone());
            async move { accept_tcp_connection(stream, peer, |_| Ok(Some(svc.clone()))) }
        };
        let _ = Server::new(listener).serve(&on_connected, |_| {}).await;
    });
    (addr, shared)
}

fn device(reg: &Connections, addr: SocketAddr, unit: u8, timeout_ms: u64) -> ModbusDevice {
    modbus_tcp(reg, &addr.to_string(), unit, timeout_ms).unwrap()
}

#[tokio::test]
async fn reads_every_area() {
    let (addr, _) = server().await;
    let dev = device(&Connections::new(), addr, 1, 1000);
    assert_eq!(
        dev.read(Area::Holding, 2, 3).await,
        Ok(Ok(Data::Words(vec![1002, 1003, 1004])))
    );
    assert_eq!(
        dev.read(Area::Input, 0, 2).await,
        Ok(Ok(Data::Words(vec![100, 101])))
    );
    // Bits arrive padded to a whole byte on the wire; the driver returns exactly `count`.
    assert_eq!(
        dev.read(Area::DiscreteInput, 0, 3).await,
        Ok(Ok(Data::Bits(vec![false, true, false])))
    );
    assert_eq!(
        dev.read(Area::Coil, 0, 10).await,
        Ok(Ok(Data::Bits(vec![false; 10])))
    );
}

#[tokio::test]
async fn one_item_writes_use_fc05_fc06_several_use_fc15_fc16() {
    let (addr, shared) = server().await;
    let dev = device(&Connections::new(), addr, 1, 1000);
    let coil = Write::Coils {
        start: 1,
        values: vec![true],
    };
    assert_eq!(dev.write(coil).await, Ok(Ok(())));
    assert_eq!(shared.last_function(), 0x05);
    let coils = Write::Coils {
        start: 3,
        values: vec![true, false, true],
    };
    assert_eq!(dev.write(coils).await, Ok(Ok(())));
    assert_eq!(shared.last_function(), 0x0F);
    assert_eq!(
        dev.read(Area::Coil, 0, 6).await,
        Ok(Ok(Data::Bits(vec![false, true, false, true, false, true])))
    );
    let reg = Write::Registers {
        start: 0,
        values: vec![42],
    };
    assert_eq!(dev.write(reg).await, Ok(Ok(())));
    assert_eq!(shared.last_function(), 0x06);
    // An i64 is four registers in one FC16 request.
    let wide = Write::Registers {
        start: 4,
        values: vec![0xDEAD, 0xBEEF, 0x0123, 0x4567],
    };
    assert_eq!(dev.write(wide).await, Ok(Ok(())));
    assert_eq!(shared.last_function(), 0x10);
    assert_eq!(
        dev.read(Area::Holding, 0, 8).await,
        Ok(Ok(Data::Words(vec![
            42, 1001, 1002, 1003, 0xDEAD, 0xBEEF, 0x0123, 0x4567
        ])))
    );
    let fcs: Vec<u8> = shared.log.lock().unwrap().iter().map(|e| e.1).collect();
    assert_eq!(fcs, [0x05, 0x0F, 0x01, 0x06, 0x10, 0x03]);
}

#[tokio::test]
async fn exceptions_are_answers_not_transport_errors() {
    let (addr, shared) = server().await;
    let dev = device(&Connections::new(), addr, 1, 1000);
    for code in [1u8, 2, 3, 4, 6, 0x0B] {
        shared.set_fail(Some(code));
        assert_eq!(
            dev.read(Area::Holding, 0, 1).await,
            Ok(Err(Exception(code))),
            "read, exception {code}"
        );
        let w = Write::Registers {
            start: 0,
            values: vec![1, 2],
        };
        assert_eq!(dev.write(w).await, Ok(Err(Exception(code))), "write");
    }
    shared.set_fail(None);
    // An address the unit lacks is the server's own exception 2.
    assert_eq!(
        dev.read(Area::Holding, 9, 2).await,
        Ok(Err(Exception::ILLEGAL_DATA_ADDRESS))
    );
    // Exceptions never cost the connection.
    assert_eq!(shared.accepted.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_silent_listener_times_out() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // A zombie: accepts, holds the socket, never answers.
    let held = tokio::spawn(async move {
        let mut socks = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            socks.push(s);
        }
    });
    let dev = device(&Connections::new(), addr, 1, 150);
    let started = std::time::Instant::now();
    assert_eq!(
        dev.read(Area::Holding, 0, 1).await,
        Err(TransportError::Timeout(150))
    );
    assert!(started.elapsed() < Duration::from_millis(1000));
    held.abort();
}

#[tokio::test]
async fn after_a_timeout_a_fresh_connection_gets_the_next_answer() {
    let (addr, shared) = server().await;
    let dev = device(&Connections::new(), addr, 1, 300);
    assert_eq!(
        dev.read(Area::Holding, 0, 1).await,
        Ok(Ok(Data::Words(vec![1000])))
    );
    // The answer to this read comes 1 s late, on the old connection.
    shared.set_delay(Duration::from_millis(1000));
    assert_eq!(
        dev.read(Area::Holding, 0, 1).await,
        Err(TransportError::Timeout(300))
    );
    shared.set_delay(Duration::ZERO);
    shared.units.lock().unwrap().get_mut(&1).unwrap().holding[0] = 7;
    // Recovers after the first backoff step (100 ms, inside this request's 300 ms) and reads
    // the current value: the late answer (1000) never reaches this request.
    assert_eq!(
        dev.read(Area::Holding, 0, 1).await,
        Ok(Ok(Data::Words(vec![7])))
    );
    assert_eq!(shared.accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_request_dropped_by_its_caller_takes_the_connection_with_it() {
    let (addr, shared) = server().await;
    let dev = device(&Connections::new(), addr, 1, 5000);
    shared.set_delay(Duration::from_millis(500));
    // The engine's own timeout, shorter than the driver's, drops the future mid-request.
    let dropped = tokio::time::timeout(Duration::from_millis(50), dev.read(Area::Input, 0, 1));
    assert!(dropped.await.is_err());
    shared.set_delay(Duration::ZERO);
    assert_eq!(
        dev.read(Area::Holding, 1, 1).await,
        Ok(Ok(Data::Words(vec![1001])))
    );
    assert_eq!(shared.accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn connection_refused_is_disconnected_and_backs_off() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap().port()
    };
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let dev = device(&Connections::new(), addr, 1, 150);
    let first = dev.read(Area::Coil, 0, 1).await;
    assert!(
        matches!(&first, Err(TransportError::Disconnected(m)) if m.contains("refused")),
        "{first:?}"
    );
    // The backoff keeps growing; once it outlasts the request's timeout, the answer is at once.
    for _ in 0..3 {
        let _ = dev.read(Area::Coil, 0, 1).await;
    }
    let started = std::time::Instant::now();
    assert!(matches!(
        dev.read(Area::Coil, 0, 1).await,
        Err(TransportError::Disconnected(_))
    ));
    assert!(started.elapsed() < Duration::from_millis(50));
}

#[tokio::test]
async fn two_units_share_one_connection_one_request_at_a_time() {
    let (addr, shared) = server().await;
    shared.set_delay(Duration::from_millis(1));
    let reg = Connections::new();
    let one = device(&reg, addr, 1, 2000);
    let two = device(&reg, addr, 2, 2000);
    assert!(Arc::ptr_eq(&one.conn, &two.conn));
    let poll = |dev: ModbusDevice, unit: u16| async move {
        for i in 0..40u16 {
            let start = i % 8;
            let got = dev.read(Area::Holding, start, 2).await;
            let want = Data::Words(vec![unit * 1000 + start, unit * 1000 + start + 1]);
            assert_eq!(got, Ok(Ok(want)), "unit {unit}, read {i}");
        }
    };
    let a = tokio::spawn(poll(one, 1));
    let b = tokio::spawn(poll(two, 2));
    a.await.unwrap();
    b.await.unwrap();
    assert_eq!(shared.accepted.load(Ordering::SeqCst), 1);
    assert_eq!(shared.max_in_flight.load(Ordering::SeqCst), 1);
    let units: Vec<u8> = shared.log.lock().unwrap().iter().map(|e| e.0).collect();
    assert_eq!(units.len(), 80);
    assert!(units.contains(&1) && units.contains(&2));
}

#[tokio::test]
async fn impossible_requests_are_not_sent() {
    let (addr, shared) = server().await;
    let dev = device(&Connections::new(), addr, 1, 1000);
    assert!(matches!(
        dev.read(Area::Holding, 0, 200).await,
        Err(TransportError::Io(m)) if m.starts_with("not sent")
    ));
    assert!(shared.log.lock().unwrap().is_empty());
}
