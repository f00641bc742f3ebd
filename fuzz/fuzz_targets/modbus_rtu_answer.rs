//! Modbus RTU answers from a device, through closedloop-modbus's public API: a `ModbusDevice` on
//! `Connection::rtu_over` sends one request over a scripted serial line that answers with the
//! fuzzer's bytes (in chunks of a fuzzed size, then end of line). That reaches the RTU framing
//! (`rtu::frame::answer_len` and `decode_answer`, both `pub(crate)`, and through them the PDU codec
//! `pdu::Response`) exactly as a serial port does.
//!
//! Input: `unit, kind, start (2), count (2), flags, rest...`
//! - `kind % 6`: read coils, discrete inputs, holding, input registers; write coils; write
//!   registers. `count` is folded into what one request may carry.
//! - `flags` bit 0: the answer is built here, correctly framed, from `rest` (oracle mode: the
//!   driver must return exactly that data, echo or exception); otherwise `rest` is the answer.
//! - `flags` bit 1: append the right CRC to `rest` (so arbitrary bodies pass the CRC check).
//! - `flags` bits 2–5: the line delivers the answer that many bytes per read (0: all at once).
//!
//! Properties: no panic, no hang; a data answer carries exactly the items asked for, bits for bit
//! areas and registers for register areas; in oracle mode the answer is exactly the one built.

#![no_main]

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use closedloop_contract::{Area, Data, Driver, Exception, Write};
use closedloop_modbus::pdu::pack_bits;
use closedloop_modbus::rtu::frame::seal;
use closedloop_modbus::{Connection, ModbusDevice};
use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A serial line that answers only after the request was written: before that, reads are
/// pending (the driver discards pending input with a zero timeout before each request).
struct Line {
    answer: Arc<Vec<u8>>,
    pos: usize,
    chunk: usize,
    written: bool,
}

impl AsyncRead for Line {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.written {
            // Nothing to wake: the only read before the request is under a zero timeout, which
            // the paused clock fires.
            return Poll::Pending;
        }
        let left = self.answer.len() - self.pos;
        let n = left.min(self.chunk).min(buf.remaining());
        let start = self.pos;
        buf.put_slice(&self.answer[start..start + n]);
        self.pos += n;
        Poll::Ready(Ok(())) // 0 bytes at the end: the line closed
    }
}

impl AsyncWrite for Line {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.written = true;
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

thread_local! {
    static RT: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
}

#[derive(Debug)]
enum Op {
    Read(Area, u16, u16),
    Write(Write),
}

/// What the driver must return in oracle mode.
#[derive(Debug, PartialEq)]
enum Expected {
    Data(Data),
    Written,
    Exception(u8),
}

fn byte(data: &[u8], i: usize) -> u8 {
    data.get(i).copied().unwrap_or(0)
}

fn op(kind: u8, start: u16, count: u16, rest: &[u8]) -> Op {
    let area = [Area::Coil, Area::DiscreteInput, Area::Holding, Area::Input];
    match kind % 6 {
        k @ 0..=3 => {
            let area = area[usize::from(k)];
            let max = if area.is_bit() { 2000 } else { 125 };
            let count = 1 + count % max;
            Op::Read(area, start.min(u16::MAX - (count - 1)), count)
        }
        4 => {
            let n = 1 + usize::from(count % 1968);
            let values: Vec<bool> = (0..n)
                .map(|i| byte(rest, i / 8) >> (i % 8) & 1 == 1)
                .collect();
            Op::Write(Write::Coils {
                start: start.min((0x1_0000 - n) as u16),
                values,
            })
        }
        _ => {
            let n = 1 + usize::from(count % 123);
            let values: Vec<u16> = (0..n)
                .map(|i| u16::from_be_bytes([byte(rest, 2 * i), byte(rest, 2 * i + 1)]))
                .collect();
            Op::Write(Write::Registers {
                start: start.min((0x1_0000 - n) as u16),
                values,
            })
        }
    }
}

fn function(op: &Op) -> u8 {
    match op {
        Op::Read(Area::Coil, ..) => 0x01,
        Op::Read(Area::DiscreteInput, ..) => 0x02,
        Op::Read(Area::Holding, ..) => 0x03,
        Op::Read(Area::Input, ..) => 0x04,
        Op::Write(Write::Coils { values, .. }) if values.len() == 1 => 0x05,
        Op::Write(Write::Registers { values, .. }) if values.len() == 1 => 0x06,
        Op::Write(Write::Coils { .. }) => 0x0F,
        Op::Write(Write::Registers { .. }) => 0x10,
    }
}

/// A correct answer frame (CRC included) to `op` from `unit`, and what the driver must make of it.
fn oracle(unit: u8, op: &Op, rest: &[u8]) -> (Vec<u8>, Expected) {
    let fc = function(op);
    if byte(rest, 0) & 0x80 != 0 {
        let code = byte(rest, 1);
        let mut f = vec![unit, fc | 0x80, code];
        seal(&mut f);
        return (f, Expected::Exception(code));
    }
    let rest = rest.get(1..).unwrap_or(&[]);
    let mut f = vec![unit, fc];
    let expected = match op {
        Op::Read(area, _, count) if area.is_bit() => {
            let bits: Vec<bool> = (0..usize::from(*count))
                .map(|i| byte(rest, i / 8) >> (i % 8) & 1 == 1)
                .collect();
            let packed = pack_bits(&bits);
            f.push(packed.len() as u8);
            f.extend_from_slice(&packed);
            Expected::Data(Data::Bits(bits))
        }
        Op::Read(_, _, count) => {
            let words: Vec<u16> = (0..usize::from(*count))
                .map(|i| u16::from_be_bytes([byte(rest, 2 * i), byte(rest, 2 * i + 1)]))
                .collect();
            f.push((words.len() * 2) as u8);
            for w in &words {
                f.extend_from_slice(&w.to_be_bytes());
            }
            Expected::Data(Data::Words(words))
        }
        Op::Write(w) => {
            f.extend_from_slice(&w.start().to_be_bytes());
            let second = match (fc, w) {
                (0x05, Write::Coils { values, .. }) => {
                    if values[0] {
                        0xFF00
                    } else {
                        0
                    }
                }
                (0x06, Write::Registers { values, .. }) => values[0],
                (_, Write::Coils { values, .. }) => values.len() as u16,
                (_, Write::Registers { values, .. }) => values.len() as u16,
            };
            f.extend_from_slice(&second.to_be_bytes());
            Expected::Written
        }
    };
    seal(&mut f);
    (f, expected)
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 7 {
        return;
    }
    let unit = data[0];
    let start = u16::from_be_bytes([data[2], data[3]]);
    let count = u16::from_be_bytes([data[4], data[5]]);
    let flags = data[6];
    let rest = &data[7..];
    let op = op(data[1], start, count, rest);
    let (answer, expected) = if flags & 1 != 0 {
        let (f, e) = oracle(unit, &op, rest);
        (f, Some(e))
    } else {
        let mut f = rest.to_vec();
        if flags & 2 != 0 {
            seal(&mut f);
        }
        (f, None)
    };
    let chunk = match usize::from(flags >> 2 & 0x0F) {
        0 => usize::MAX,
        n => n,
    };
    let answer = Arc::new(answer);
    let conn = Connection::rtu_over("modbus-rtu fuzz".into(), move || {
        let line = Line {
            answer: answer.clone(),
            pos: 0,
            chunk,
            written: false,
        };
        async move { Ok(line) }
    });
    let dev = ModbusDevice {
        conn: Arc::new(conn),
        unit,
        timeout_ms: 1000,
    };
    RT.with(|rt| {
        rt.block_on(async {
            let got = match &op {
                Op::Read(area, start, count) => {
                    let got = dev.read(*area, *start, *count).await;
                    if let Ok(Ok(d)) = &got {
                        assert_eq!(d.len(), usize::from(*count), "{op:?} answered {d:?}");
                        assert_eq!(
                            matches!(d, Data::Bits(_)),
                            area.is_bit(),
                            "{op:?} answered {d:?}"
                        );
                    }
                    got.map(|r| r.map(Expected::Data))
                }
                Op::Write(w) => dev
                    .write(w.clone())
                    .await
                    .map(|r| r.map(|()| Expected::Written)),
            };
            if let Some(expected) = expected {
                let got = match got {
                    Ok(Ok(e)) => e,
                    Ok(Err(Exception(code))) => Expected::Exception(code),
                    Err(e) => panic!("{op:?}: a well-formed answer failed: {e:?}"),
                };
                assert_eq!(got, expected, "{op:?}");
            }
        })
    });
});
