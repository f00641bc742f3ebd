//! The Modbus RTU driver over `tokio::io::duplex`, against a hand-written RTU unit that can
//! garble its CRC, answer exceptions, or stay silent.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use closedloop_contract::{Area, Data, Driver, Exception, TransportError, Write};
use closedloop_modbus::pdu::pack_bits;
use closedloop_modbus::rtu::frame::{crc16, seal};
use closedloop_modbus::{Connection, ModbusDevice};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

#[derive(Clone, Copy, PartialEq, Debug)]
enum Mode {
    Normal,
    BadCrc,
    Silent,
    Exception(u8),
}

struct Unit {
    mode: Mutex<Mode>,
    holding: Mutex<Vec<u16>>,
    coils: Mutex<Vec<bool>>,
    opens: AtomicUsize,
    /// Function codes served, in order.
    log: Mutex<Vec<(u8, u8)>>,
}

impl Unit {
    fn new() -> Arc<Unit> {
        Arc::new(Unit {
            mode: Mutex::new(Mode::Normal),
            holding: Mutex::new((0..10).collect()),
            coils: Mutex::new(vec![false; 10]),
            opens: AtomicUsize::new(0),
            log: Mutex::new(Vec::new()),
        })
    }

    fn set(&self, m: Mode) {
        *self.mode.lock().unwrap() = m;
    }

    /// The answer body (without CRC) to one request frame (CRC already checked).
    fn answer(&self, req: &[u8]) -> Vec<u8> {
        let (unit, fc) = (req[0], req[1]);
        self.log.lock().unwrap().push((unit, fc));
        let word = |i: usize| u16::from_be_bytes([req[i], req[i + 1]]);
        if let Mode::Exception(code) = *self.mode.lock().unwrap() {
            return vec![unit, fc | 0x80, code];
        }
        let (a, n) = (usize::from(word(2)), usize::from(word(4)));
        let mut out = vec![unit, fc];
        match fc {
            0x01 => {
                let bits = pack_bits(&self.coils.lock().unwrap()[a..a + n]);
                out.push(bits.len() as u8);
                out.extend(bits);
            }
            // The unit serves every unit address: its holding registers plus 100 × unit.
            0x03 => {
                out.push((n * 2) as u8);
                for v in &self.holding.lock().unwrap()[a..a + n] {
                    out.extend((v + 100 * u16::from(unit)).to_be_bytes());
                }
            }
            0x05 => {
                self.coils.lock().unwrap()[a] = word(4) == 0xFF00;
                out.extend(&req[2..6]);
            }
            0x06 => {
                self.holding.lock().unwrap()[a] = word(4);
                out.extend(&req[2..6]);
            }
            0x0F => {
                let mut coils = self.coils.lock().unwrap();
                for i in 0..n {
                    coils[a + i] = req[7 + i / 8] & (1 << (i % 8)) != 0;
                }
                out.extend(&req[2..6]);
            }
            0x10 => {
                let mut h = self.holding.lock().unwrap();
                for i in 0..n {
                    h[a + i] = word(7 + 2 * i);
                }
                out.extend(&req[2..6]);
            }
            _ => return vec![unit, fc | 0x80, 1],
        }
        out
    }

    async fn serve<S: AsyncRead + AsyncWrite + Unpin>(self: Arc<Unit>, mut line: S) {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 256];
        loop {
            let len = match buf.get(1) {
                Some(0x0F | 0x10) => buf.get(6).map(|&n| 9 + usize::from(n)),
                Some(_) => Some(8),
                None => None,
            };
            if let Some(len) = len.filter(|&l| buf.len() >= l) {
                let frame: Vec<u8> = buf.drain(..len).collect();
                let (body, crc) = frame.split_at(len - 2);
                assert_eq!(crc16(body).to_le_bytes(), crc, "the driver's request CRC");
                let mode = *self.mode.lock().unwrap();
                if mode == Mode::Silent {
                    continue;
                }
                let mut out = self.answer(body);
                seal(&mut out);
                if mode == Mode::BadCrc {
                    let last = out.len() - 1;
                    out[last] ^= 0xFF;
                }
                if line.write_all(&out).await.is_err() {
                    return;
                }
                continue;
            }
            match line.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    }
}

/// A connection whose every (re)open is a fresh duplex pipe to `unit`.
fn line(unit: &Arc<Unit>) -> Arc<Connection> {
    let unit = unit.clone();
    Arc::new(Connection::rtu_over("modbus-rtu test".into(), move || {
        let unit = unit.clone();
        async move {
            unit.opens.fetch_add(1, Ordering::SeqCst);
            let (ours, theirs) = tokio::io::duplex(512);
            tokio::spawn(unit.serve(theirs));
            Ok(ours)
        }
    }))
}

fn device(conn: &Arc<Connection>, unit: u8, timeout_ms: u64) -> ModbusDevice {
    ModbusDevice {
        conn: conn.clone(),
        unit,
        timeout_ms,
    }
}

#[tokio::test]
async fn reads_and_writes_pick_the_right_function() {
    let u = Unit::new();
    let dev = device(&line(&u), 1, 500);
    assert_eq!(
        dev.read(Area::Holding, 1, 2).await,
        Ok(Ok(Data::Words(vec![101, 102])))
    );
    let one = Write::Registers {
        start: 0,
        values: vec![7],
    };
    assert_eq!(dev.write(one).await, Ok(Ok(())));
    let wide = Write::Registers {
        start: 2,
        values: vec![0xAAAA, 0xBBBB],
    };
    assert_eq!(dev.write(wide).await, Ok(Ok(())));
    assert_eq!(u.holding.lock().unwrap()[..4], [7, 1, 0xAAAA, 0xBBBB]);
    let coil = Write::Coils {
        start: 9,
        values: vec![true],
    };
    assert_eq!(dev.write(coil).await, Ok(Ok(())));
    let coils = Write::Coils {
        start: 0,
        values: vec![true, false, true],
    };
    assert_eq!(dev.write(coils).await, Ok(Ok(())));
    assert_eq!(
        dev.read(Area::Coil, 0, 10).await,
        Ok(Ok(Data::Bits(vec![
            true, false, true, false, false, false, false, false, false, true
        ])))
    );
    let fcs: Vec<u8> = u.log.lock().unwrap().iter().map(|e| e.1).collect();
    assert_eq!(fcs, [0x03, 0x06, 0x10, 0x05, 0x0F, 0x01]);
}

#[tokio::test]
async fn exceptions_are_answers() {
    let u = Unit::new();
    let dev = device(&line(&u), 1, 500);
    for code in [1u8, 2, 3, 4, 6, 0x0B] {
        u.set(Mode::Exception(code));
        assert_eq!(
            dev.read(Area::Holding, 0, 1).await,
            Ok(Err(Exception(code)))
        );
    }
}

#[tokio::test]
async fn a_bad_crc_is_reported_and_the_line_stays_usable() {
    let u = Unit::new();
    let dev = device(&line(&u), 1, 500);
    u.set(Mode::BadCrc);
    assert_eq!(
        dev.read(Area::Holding, 0, 3).await,
        Err(TransportError::Crc)
    );
    let w = Write::Registers {
        start: 0,
        values: vec![5],
    };
    // The write took effect although its answer was garbled: that is why CRC_MISMATCH says so.
    assert_eq!(dev.write(w).await, Err(TransportError::Crc));
    assert_eq!(u.holding.lock().unwrap()[0], 5);
    u.set(Mode::Normal);
    assert_eq!(
        dev.read(Area::Holding, 0, 1).await,
        Ok(Ok(Data::Words(vec![105])))
    );
    assert_eq!(u.opens.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn silence_times_out_and_the_port_is_reopened() {
    let u = Unit::new();
    let dev = device(&line(&u), 1, 300);
    u.set(Mode::Silent);
    assert_eq!(
        dev.read(Area::Holding, 0, 1).await,
        Err(TransportError::Timeout(300))
    );
    u.set(Mode::Normal);
    assert_eq!(
        dev.read(Area::Holding, 4, 1).await,
        Ok(Ok(Data::Words(vec![104])))
    );
    assert_eq!(u.opens.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn units_on_one_line_take_turns() {
    let u = Unit::new();
    let conn = line(&u);
    let poll = |dev: ModbusDevice| async move {
        for i in 0..30u16 {
            let got = dev.read(Area::Holding, i % 5, 1).await;
            let want = 100 * u16::from(dev.unit) + i % 5;
            assert_eq!(got, Ok(Ok(Data::Words(vec![want]))));
        }
    };
    let a = tokio::spawn(poll(device(&conn, 1, 1000)));
    let b = tokio::spawn(poll(device(&conn, 2, 1000)));
    a.await.unwrap();
    b.await.unwrap();
    assert_eq!(u.opens.load(Ordering::SeqCst), 1);
    assert_eq!(u.log.lock().unwrap().len(), 60);
}

/// A real tty: the driver opens the slave side of a pty by its path, as it would open
/// /dev/ttyUSB0; the scripted unit answers on the master side.
#[cfg(all(unix, feature = "rtu"))]
#[tokio::test]
async fn over_a_pty_opened_by_path() {
    use closedloop_modbus::{Connections, Parity, modbus_rtu};
    use tokio_serial::SerialPort;
    let (master, slave) = tokio_serial::SerialStream::pair().unwrap();
    let path = slave.name().unwrap();
    let u = Unit::new();
    tokio::spawn(u.clone().serve(master));
    let reg = Connections::new();
    let dev = modbus_rtu(&reg, &path, 19200, Parity::None, 3, 1000).unwrap();
    assert_eq!(
        dev.read(Area::Holding, 0, 2).await,
        Ok(Ok(Data::Words(vec![300, 301])))
    );
    u.set(Mode::BadCrc);
    assert_eq!(
        dev.read(Area::Holding, 0, 2).await,
        Err(TransportError::Crc)
    );
    drop(slave);
}
