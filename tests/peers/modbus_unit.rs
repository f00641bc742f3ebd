//! A Modbus TCP unit written from the specification alone, for the tests: plain sockets, no
//! code of closedloop's (not its simulator, not its PDU codec), so what closedloop reads from it
//! is checked against a peer it did not write. Included by the tests of several crates with
//! `#[path = "../../../tests/peers/modbus_unit.rs"] mod modbus_unit;`.
//!
//! Every unit id has four tables of 64 entries. A test sets values, makes a register answer an
//! exception when read (`refuse_reads`), ties coils to discrete inputs (a relay whose contact
//! follows its coil), and reads back every write it received with the writer's address — the
//! ground truth of what reached the device.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const SIZE: usize = 64;

/// The four tables of one unit id.
#[derive(Debug, Clone, Default)]
pub struct Tables {
    pub coils: BTreeMap<u16, bool>,
    pub discrete: BTreeMap<u16, bool>,
    pub holding: BTreeMap<u16, u16>,
    pub input: BTreeMap<u16, u16>,
    /// Function code 3 or 4 and address → the exception a read covering it answers.
    pub refused: BTreeMap<(u8, u16), u8>,
    /// Coils whose discrete input of the same number follows them (a relay's contact).
    pub contacts: BTreeSet<u16>,
}

/// One write as the unit received it.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    pub from: SocketAddr,
    pub unit: u8,
    pub function: u8,
    pub address: u16,
}

#[derive(Default)]
struct State {
    units: BTreeMap<u8, Tables>,
    writes: Vec<Written>,
}

/// The unit, serving on a loopback port of its own until dropped.
pub struct ModbusUnit {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ModbusUnit {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ModbusUnit {
    /// Listens on 127.0.0.1:0.
    pub async fn start() -> ModbusUnit {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = Arc::new(Mutex::new(State::default()));
        let shared = Arc::clone(&state);
        let task = tokio::spawn(async move {
            while let Ok((socket, peer)) = listener.accept().await {
                tokio::spawn(serve(socket, peer, Arc::clone(&shared)));
            }
        });
        ModbusUnit { addr, state, task }
    }

    /// Changes unit `unit`'s tables.
    pub fn with<T>(&self, unit: u8, f: impl FnOnce(&mut Tables) -> T) -> T {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        f(s.units.entry(unit).or_default())
    }

    /// Sets a holding register.
    pub fn set_holding(&self, unit: u8, address: u16, value: u16) {
        self.with(unit, |t| t.holding.insert(address, value));
    }

    /// Sets a discrete input.
    pub fn set_discrete(&self, unit: u8, address: u16, value: bool) {
        self.with(unit, |t| t.discrete.insert(address, value));
    }

    /// A read of holding register `address` (function 3) answers exception `code` from now on;
    /// `None` lets it read again.
    pub fn refuse_holding(&self, unit: u8, address: u16, code: Option<u8>) {
        self.with(unit, |t| match code {
            Some(c) => t.refused.insert((3, address), c),
            None => t.refused.remove(&(3, address)),
        });
    }

    /// A coil's value.
    pub fn coil(&self, unit: u8, address: u16) -> bool {
        self.with(unit, |t| t.coils.get(&address).copied().unwrap_or(false))
    }

    /// Every write received so far.
    pub fn writes(&self) -> Vec<Written> {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.writes.clone()
    }
}

/// One connection: MBAP-framed requests answered in order.
async fn serve(mut socket: TcpStream, peer: SocketAddr, state: Arc<Mutex<State>>) {
    let mut head = [0u8; 7];
    while socket.read_exact(&mut head).await.is_ok() {
        let len = usize::from(u16::from_be_bytes([head[4], head[5]]));
        if !(2..=254).contains(&len) {
            return;
        }
        let mut pdu = vec![0u8; len - 1];
        if socket.read_exact(&mut pdu).await.is_err() {
            return;
        }
        let unit = head[6];
        let answer = {
            let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
            answer(&mut s, peer, unit, &pdu)
        };
        let mut frame = Vec::with_capacity(7 + answer.len());
        frame.extend_from_slice(&head[..4]);
        frame.extend_from_slice(&((answer.len() + 1) as u16).to_be_bytes());
        frame.push(unit);
        frame.extend_from_slice(&answer);
        if socket.write_all(&frame).await.is_err() {
            return;
        }
    }
}

fn word(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// The response PDU to one request PDU.
fn answer(s: &mut State, peer: SocketAddr, unit: u8, pdu: &[u8]) -> Vec<u8> {
    let (Some(&function), Some(address), Some(arg)) = (pdu.first(), word(pdu, 1), word(pdu, 3))
    else {
        return vec![pdu.first().copied().unwrap_or(0) | 0x80, 3];
    };
    let refuse = |code: u8| vec![function | 0x80, code];
    let t = s.units.entry(unit).or_default();
    let end = usize::from(address) + usize::from(arg);
    match function {
        1..=4 if arg == 0 || end > SIZE => refuse(2),
        1 | 2 => read_bits(t, function, address, arg),
        3 | 4 => match read_words(t, function, address, arg) {
            Ok(out) => out,
            Err(code) => refuse(code),
        },
        5 | 6 if usize::from(address) >= SIZE => refuse(2),
        15 | 16 if arg == 0 || end > SIZE => refuse(2),
        5 | 6 | 15 | 16 => {
            apply_write(t, function, address, arg, pdu);
            s.writes.push(Written {
                from: peer,
                unit,
                function,
                address,
            });
            pdu[..5].to_vec()
        }
        _ => refuse(1),
    }
}

/// Function 1 (coils) or 2 (discrete inputs): `count` bits from `address`, packed.
fn read_bits(t: &Tables, function: u8, address: u16, count: u16) -> Vec<u8> {
    let table = if function == 1 { &t.coils } else { &t.discrete };
    let bits: Vec<bool> = (address..address + count)
        .map(|a| table.get(&a).copied().unwrap_or(false))
        .collect();
    let mut out = vec![function, bits.len().div_ceil(8) as u8];
    for chunk in bits.chunks(8) {
        let byte = (chunk.iter().enumerate()).fold(0u8, |b, (i, on)| b | (u8::from(*on) << i));
        out.push(byte);
    }
    out
}

/// Function 3 (holding) or 4 (input): `count` registers from `address`, or the exception a
/// refused one among them answers.
fn read_words(t: &Tables, function: u8, address: u16, count: u16) -> Result<Vec<u8>, u8> {
    if let Some(code) = (address..address + count).find_map(|a| t.refused.get(&(function, a))) {
        return Err(*code);
    }
    let table = if function == 3 { &t.holding } else { &t.input };
    let mut out = vec![function, (count * 2) as u8];
    for a in address..address + count {
        out.extend_from_slice(&table.get(&a).copied().unwrap_or(0).to_be_bytes());
    }
    Ok(out)
}

/// Function 5, 6, 15 or 16 (its range checked): the write applied to the tables. `arg` is the
/// value (5, 6) or the count (15, 16).
fn apply_write(t: &mut Tables, function: u8, address: u16, arg: u16, pdu: &[u8]) {
    match function {
        5 => set_coil(t, address, arg == 0xFF00),
        6 => {
            t.holding.insert(address, arg);
        }
        15 => {
            for i in 0..arg {
                let byte = pdu.get(6 + usize::from(i / 8)).copied().unwrap_or(0);
                set_coil(t, address + i, byte & (1 << (i % 8)) != 0);
            }
        }
        _ => {
            for i in 0..arg {
                let v = word(pdu, 6 + 2 * usize::from(i)).unwrap_or(0);
                t.holding.insert(address + i, v);
            }
        }
    }
}

fn set_coil(t: &mut Tables, address: u16, on: bool) {
    t.coils.insert(address, on);
    if t.contacts.contains(&address) {
        t.discrete.insert(address, on);
    }
}
