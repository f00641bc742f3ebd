//! Register devices (sim, Modbus): one poll cycle reads every declared signal, neighbouring
//! addresses of one area merged into one request and never across gaps, and changes the
//! snapshot in place (see the parent module's doc for the numbering that makes reads fresh).

use super::RegisterLink;
use closedloop_contract::{Area, Data, Encoding, ErrorCode, TransportError, Value};
use closedloop_plant::{Device, Source};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::sync::Notify;
use tokio::time::Instant;

/// What the poller knows about the device being alive.
#[derive(Debug, Default)]
pub(super) struct Alive {
    /// The last valid answer (or, with a heartbeat register, the last change of the counter).
    last_valid: Option<Instant>,
    /// The heartbeat counter's last value.
    counter: Option<u16>,
}

/// One merged read request and the signals it serves.
#[derive(Debug, Clone)]
pub(super) struct Block {
    area: Area,
    start: u16,
    count: u16,
    signals: Vec<(String, u16, Encoding)>,
}

impl RegisterLink {
    /// Polls the device from its shard (see `shard.rs`) until `stop`.
    pub(super) async fn poll(self: Arc<Self>, stop: Arc<Notify>) {
        // Made first: a stop from now on is not missed.
        let stopped = stop.notified();
        tokio::pin!(stopped);
        // The first cycle here, as soon as the reader runs: whatever starts after the readers
        // (an alarm's watcher) finds the device read, not "not heard from yet".
        let mut kept = super::shard::Kept::default();
        let (alive, got) = &mut *kept;
        tokio::select! {
            () = self.timed_cycle(alive, got) => {}
            () = &mut stopped => return,
        }
        let _member = self.seat.join(Arc::clone(&self), kept);
        stopped.await;
    }

    /// One cycle, timed for `closedloop_device_poll_duration_seconds` and
    /// `closedloop_device_last_poll_seconds`.
    pub(super) async fn timed_cycle(&self, alive: &mut Alive, got: &mut Cycle) {
        let began = Instant::now();
        self.cycle(alive, got).await;
        self.timed(began);
    }

    /// [`RegisterLink::timed_cycle`] without waiting, when the driver answers every block at
    /// once (`Driver::read_now`: an in-process device without latency, loss or CRC faults);
    /// false, with nothing published, when it would have to wait: then run `timed_cycle`.
    pub(super) fn timed_cycle_now(&self, alive: &mut Alive, got: &mut Cycle) -> bool {
        let began = Instant::now();
        let done = self.cycle_now(alive, got);
        if done {
            self.timed(began);
        }
        done
    }

    fn timed(&self, began: Instant) {
        let took = began.elapsed();
        self.poll_time.record(took.as_secs_f64());
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.last_poll_us.store(micros, Ordering::Relaxed);
    }

    /// The cycle of [`RegisterLink::cycle`] with answers had at once; false (the buffers
    /// emptied, nothing published) as soon as one block would have to wait. A device with a
    /// heartbeat register always goes the waiting way. A cycle given up after it was numbered
    /// leaves its number unused: numbers only ever grow, which is all the fence rule needs.
    fn cycle_now(&self, alive: &mut Alive, got: &mut Cycle) -> bool {
        if self.base.spec.liveness.counter.is_some() || !self.driver.answers_at_once() {
            return false;
        }
        let seq = self.issued.fetch_add(1, Ordering::SeqCst) + 1;
        got.clear();
        for (b, block) in self.blocks.iter().enumerate() {
            let asked_ms = self.base.clock.now_ms();
            let Some(answer) = self.driver.read_now(block.area, block.start, block.count) else {
                got.clear();
                return false;
            };
            if !self.take_block(b, block, answer, asked_ms, true, alive, got) {
                break;
            }
        }
        self.publish(seq, alive, got);
        true
    }

    /// Reads every block once into `got` (emptied first: its buffers are kept from cycle to
    /// cycle) and publishes the sample.
    async fn cycle(&self, alive: &mut Alive, got: &mut Cycle) {
        let seq = self.issued.fetch_add(1, Ordering::SeqCst) + 1;
        got.clear();
        // With a heartbeat register, only a changed counter proves the firmware runs: a frozen
        // controller whose TCP stack still answers reads is offline all the same.
        let heartbeat = self.base.spec.liveness.counter;
        let silent = match heartbeat {
            Some(addr) => self.read_heartbeat(addr, alive, got).await,
            None => false,
        };
        for (b, block) in self.blocks.iter().enumerate().filter(|_| !silent) {
            if !self
                .read_block(b, block, heartbeat.is_none(), alive, got)
                .await
            {
                // A silent device: do not wait out every block's timeout in this cycle.
                break;
            }
        }
        self.publish(seq, alive, got);
    }

    /// Changes the sample to what cycle `seq` read into `got`, and publishes it.
    fn publish(&self, seq: u64, alive: &Alive, got: &mut Cycle) {
        let last_valid = alive.last_valid;
        let last_seen_ms = last_valid.map(|t| self.base.clock.wall_ms(t));
        // Changed in place: an idle device's cycle clones no snapshot and allocates no name.
        self.base.tx.send_modify(|snap| {
            for (b, i, value, at_ms) in got.values.drain(..) {
                let block = &self.blocks[b];
                let (name, offset, _) = &block.signals[i];
                let source = || format!("{}:{}", block.area, block.start + offset);
                snap.record(name, value, at_ms, seq, source);
            }
            for (b, i, at_ms, (code, why)) in got.refused.drain(..) {
                let name = &self.blocks[b].signals[i].0;
                snap.refuse(name, code, why, at_ms, seq);
            }
            snap.seq = seq;
            snap.last_error = got.error.take();
            snap.crc_failing = got.crc;
            snap.last_seen_ms = last_seen_ms;
            snap.last_valid = last_valid;
            snap.liveness = self.base.judge_liveness(snap);
        });
    }

    /// Reads the heartbeat counter; true when the device did not answer at all.
    async fn read_heartbeat(&self, addr: u16, alive: &mut Alive, got: &mut Cycle) -> bool {
        match self.read(Area::Holding, addr, 1).await {
            Ok(Ok(Data::Words(w))) if !w.is_empty() => {
                if alive.counter != Some(w[0]) {
                    alive.counter = Some(w[0]);
                    alive.last_valid = Some(Instant::now());
                } else {
                    got.error = Some(format!("heartbeat holding:{addr} is frozen at {}", w[0]));
                }
                false
            }
            Ok(Ok(_)) => {
                got.error = Some(format!("heartbeat holding:{addr} answered no register"));
                false
            }
            Ok(Err(exception)) => {
                got.error = Some(format!("heartbeat holding:{addr} answered {exception}"));
                false
            }
            Err(e) => {
                got.crc = matches!(e, TransportError::Crc);
                got.error = Some(e.to_string());
                true
            }
        }
    }

    /// Reads one block into `got`; false when the device did not answer (end the cycle).
    async fn read_block(
        &self,
        b: usize,
        block: &Block,
        answers_are_life: bool,
        alive: &mut Alive,
        got: &mut Cycle,
    ) -> bool {
        // A value is stamped with when it was asked for, the earliest the device can have read
        // it, not when its answer came: on a slow line (a long block at 9,600 baud) a value read
        // during a relay's pull-in could otherwise pass for one read after `expect_s`.
        let asked_ms = self.base.clock.now_ms();
        let answer = self.read(block.area, block.start, block.count).await;
        self.take_block(b, block, answer, asked_ms, answers_are_life, alive, got)
    }

    /// What one block's `answer` (asked for at `asked_ms`) says, into `got`; false when the
    /// device did not answer (end the cycle).
    #[allow(clippy::too_many_arguments)]
    fn take_block(
        &self,
        b: usize,
        block: &Block,
        answer: closedloop_contract::Answer<Data>,
        asked_ms: i64,
        answers_are_life: bool,
        alive: &mut Alive,
        got: &mut Cycle,
    ) -> bool {
        match answer {
            Ok(Ok(data)) => {
                if answers_are_life {
                    alive.last_valid = Some(Instant::now());
                }
                let at_ms = asked_ms;
                for (i, (_, offset, enc)) in block.signals.iter().enumerate() {
                    match decode(&data, *offset, enc) {
                        Some(value) => got.values.push((b, i, value, at_ms)),
                        None => {
                            let at = format!("{}:{}", block.area, block.start + offset);
                            let why = format!("{at} answered too few items to decode");
                            let refused = (ErrorCode::RegisterInvalid, why);
                            got.refused.push((b, i, asked_ms, refused));
                        }
                    }
                }
                true
            }
            Ok(Err(exception)) => {
                // An exception is an answer: the device is there, the address is not — unless
                // a gateway sent it (0x0A/0x0B): then the unit itself is silent.
                if !is_gateway(exception) {
                    if answers_are_life {
                        alive.last_valid = Some(Instant::now());
                    }
                    let code = match exception.0 {
                        1..=3 => ErrorCode::RegisterInvalid,
                        _ => ErrorCode::BusNak,
                    };
                    for (i, (_, offset, _)) in block.signals.iter().enumerate() {
                        let at = format!("{}:{}", block.area, block.start + offset);
                        let why = format!("{at} answered {exception}");
                        got.refused.push((b, i, asked_ms, (code.clone(), why)));
                    }
                }
                got.error = Some(format!(
                    "{}:{} answered {exception}",
                    block.area, block.start
                ));
                true
            }
            Err(e) => {
                got.crc = matches!(e, TransportError::Crc);
                got.error = Some(e.to_string());
                false
            }
        }
    }
}

/// Why the device refused a signal: the contract's code and its answer.
type Refused = (ErrorCode, String);

/// What one poll cycle read, applied to the snapshot at its end; kept from cycle to cycle so a
/// poll allocates no buffers.
#[derive(Default)]
pub(super) struct Cycle {
    /// Each decoded value: its block's index, the signal's index in it, the value and when it
    /// was read.
    values: Vec<(usize, usize, Value, i64)>,
    /// Signals (block and signal index) the device refused, when asked, with the code and its
    /// answer: from then on they have no current value until they read well again.
    refused: Vec<(usize, usize, i64, Refused)>,
    error: Option<String>,
    crc: bool,
}

impl Cycle {
    /// Empty, its buffers kept.
    fn clear(&mut self) {
        self.values.clear();
        self.refused.clear();
        self.error = None;
        self.crc = false;
    }
}

/// Modbus exceptions 0x0A/0x0B come from a gateway in front of the unit, never from the unit:
/// they are no sign of its life (docs/architecture.md).
fn is_gateway(e: closedloop_contract::Exception) -> bool {
    e == closedloop_contract::Exception::GATEWAY_PATH_UNAVAILABLE
        || e == closedloop_contract::Exception::GATEWAY_TARGET_FAILED
}

fn decode(data: &Data, offset: u16, enc: &Encoding) -> Option<Value> {
    let i = usize::from(offset);
    match data {
        Data::Bits(bits) => bits.get(i).map(|b| Value::Bool(*b)),
        Data::Words(words) => {
            let n = usize::from(enc.words());
            words.get(i..i + n).map(|w| enc.decode(w))
        }
    }
}

/// The read requests one poll cycle of `device` sends, as (area, how many registers or bits):
/// the blocks [`plan_blocks`] merges, one request each. `closedloop check` prices them in line
/// time on a serial port.
pub fn poll_requests(device: &Device) -> Vec<(Area, u16)> {
    plan_blocks(device)
        .iter()
        .map(|b| (b.area, b.count))
        .collect()
}

/// Groups register signals by area and merges overlapping or adjacent address ranges into one
/// request each. Gaps are never bridged: reading an address the device does not have would turn a
/// good poll into an exception.
pub(super) fn plan_blocks(device: &Device) -> Vec<Block> {
    let mut items: Vec<(Area, u16, u16, String, Encoding)> = device
        .signals
        .iter()
        .filter_map(|s| match &s.source {
            Source::Register {
                area,
                address,
                encoding,
            } => {
                let width = if area.is_bit() { 1 } else { encoding.words() };
                Some((*area, *address, width, s.name.clone(), *encoding))
            }
            _ => None,
        })
        .collect();
    items.sort_by_key(|(area, addr, _, name, _)| (*area, *addr, name.clone()));
    let mut blocks: Vec<Block> = Vec::new();
    for (area, addr, width, name, enc) in items {
        let end = u32::from(addr) + u32::from(width);
        if let Some(b) = blocks.last_mut()
            && b.area == area
            && u32::from(addr) <= u32::from(b.start) + u32::from(b.count)
        {
            let new_end = end.max(u32::from(b.start) + u32::from(b.count));
            b.count = (new_end - u32::from(b.start)) as u16;
            b.signals.push((name, addr - b.start, enc));
            continue;
        }
        blocks.push(Block {
            area,
            start: addr,
            count: width,
            signals: vec![(name, 0, enc)],
        });
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_merge_neighbours_but_never_bridge_gaps() {
        let plant = closedloop_plant::parse(
            r#"
[[device]]
id = "d"
description = "test"
driver = { kind = "sim", model = "stepper" }
[device.signals]
position_mm = { holding = 2, type = "i32", scale = 0.01 }
target = { holding = 0, type = "i32" }
far = { holding = 10 }
moving = { discrete_input = 0 }
fault = { discrete_input = 1 }
"#,
            "t.toml",
            std::path::Path::new("."),
        )
        .expect("plant parses");
        let blocks = plan_blocks(&plant.devices[0]);
        let shape: Vec<(Area, u16, u16)> =
            blocks.iter().map(|b| (b.area, b.start, b.count)).collect();
        assert_eq!(
            shape,
            vec![
                (Area::DiscreteInput, 0, 2),
                (Area::Holding, 0, 4),
                (Area::Holding, 10, 1)
            ]
        );
    }
}
