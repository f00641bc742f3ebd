//! `stepper`: a linear axis. Holding 0–1 target and 2–3 encoder position (i32, 0.01 mm, high word
//! first); coil 0 start, 1 stop, 2 fault reset (self-clearing); discrete input 0 moving, 1 fault.
//!
//! The axis is what makes "moved to 150 mm" worth doubting: it takes time, it can stall on an
//! obstruction with its fault output active, and the position register says where it really is.

use super::{SimState, within};
use crate::model::StepperOptions;
use closedloop_contract::{Area, Exception, Write};
use tokio::time::{Duration, Instant};

/// One straight move, evaluated in closed form.
#[derive(Debug, Clone, Copy)]
struct Segment {
    from: f64,
    /// Where the move ends: the target, or an obstruction on the way.
    to: f64,
    start: Instant,
    /// When `to` is reached; `None` if too far in the future to represent.
    arrive: Option<Instant>,
    /// The move ends at an obstruction: fault goes active on arrival.
    stalls: bool,
}

/// The axis, its latched target and its fault output.
///
/// # Invariants
/// `target_raw` is always within travel (writes that would leave it are refused). While `seg` is
/// `Some`, `pos` is stale and the position comes from the segment; `fault` is never set while a
/// segment is under way (a start with fault active is ignored).
#[derive(Debug)]
pub(crate) struct Stepper {
    opts: StepperOptions,
    /// Position when idle.
    pos: f64,
    /// The move under way, if any (possibly finished but not yet settled).
    seg: Option<Segment>,
    /// The driver's fault output.
    fault: bool,
    /// The target register, in 0.01 mm.
    target_raw: i32,
    /// Positions of obstructions (stall faults with `at_mm`).
    obstacles: Vec<f64>,
}

impl Stepper {
    /// An idle axis at travel min, or at 0 when 0 is inside travel; the target is the position.
    pub fn new(opts: StepperOptions, _now: Instant) -> Stepper {
        let [min, max] = opts.travel_mm;
        let pos = if (min..=max).contains(&0.0) { 0.0 } else { min };
        let target_raw = raw(pos);
        Stepper {
            opts,
            pos,
            seg: None,
            fault: false,
            target_raw,
            obstacles: Vec::new(),
        }
    }

    /// Folds a finished move into the idle state (and its stall into the fault output).
    fn settle(&mut self, now: Instant) {
        if let Some(seg) = self.seg
            && seg.arrive.is_some_and(|a| now >= a)
        {
            self.pos = seg.to;
            self.fault |= seg.stalls;
            self.seg = None;
        }
    }

    fn position(&self, now: Instant) -> f64 {
        match self.seg {
            None => self.pos,
            Some(seg) if seg.arrive.is_some_and(|a| now >= a) => seg.to,
            Some(seg) => {
                let run =
                    self.opts.speed_mm_s * now.saturating_duration_since(seg.start).as_secs_f64();
                if seg.to >= seg.from {
                    (seg.from + run).min(seg.to)
                } else {
                    (seg.from - run).max(seg.to)
                }
            }
        }
    }

    fn moving(&self, now: Instant) -> bool {
        self.seg.is_some_and(|s| s.arrive.is_none_or(|a| now < a))
    }

    fn fault(&self, now: Instant) -> bool {
        self.fault
            || self
                .seg
                .is_some_and(|s| s.stalls && s.arrive.is_some_and(|a| now >= a))
    }

    /// Starts (or re-plans) a move from the current position to the latched target, ending early
    /// at the first obstruction strictly past the start.
    fn plan(&mut self, now: Instant) {
        self.settle(now);
        let from = self.position(now);
        self.seg = None;
        self.pos = from;
        let target = f64::from(self.target_raw) / 100.0;
        let ahead = |x: f64| {
            if target >= from {
                x > from && x <= target
            } else {
                x < from && x >= target
            }
        };
        let obstacle = self
            .obstacles
            .iter()
            .copied()
            .filter(|&x| ahead(x))
            .min_by(|a, b| (a - from).abs().total_cmp(&(b - from).abs()));
        let to = obstacle.unwrap_or(target);
        let secs = (to - from).abs() / self.opts.speed_mm_s;
        let arrive = Duration::try_from_secs_f64(secs)
            .ok()
            .and_then(|d| now.checked_add(d));
        self.seg = Some(Segment {
            from,
            to,
            start: now,
            arrive,
            stalls: obstacle.is_some(),
        });
    }

    /// Coil 0: move toward the target, unless the fault output is active.
    fn start(&mut self, now: Instant) {
        self.settle(now);
        if !self.fault {
            self.plan(now);
        }
    }

    /// Coil 1, and power loss: stop where the axis is.
    pub fn stop(&mut self, now: Instant) {
        self.settle(now);
        self.pos = self.position(now);
        self.seg = None;
    }

    /// A stall without a position: stop here, fault active.
    pub fn stall_now(&mut self, now: Instant) {
        self.stop(now);
        self.fault = true;
    }

    /// After a reboot the controller knows no fault and holds where it stands.
    pub fn reset_after_boot(&mut self, now: Instant) {
        self.stop(now);
        self.fault = false;
        self.target_raw = raw(self.pos);
    }

    /// Obstructions appear or vanish; a move under way is re-planned from where it is.
    pub fn set_obstacles(&mut self, now: Instant, obstacles: &[f64]) {
        if self.obstacles != obstacles {
            self.obstacles = obstacles.to_vec();
            self.settle(now);
            if self.moving(now) {
                self.plan(now);
            }
        }
    }

    /// Coils 0–2 read false; discrete input 0 moving, 1 fault.
    pub fn bit(&mut self, now: Instant, area: Area, addr: u16) -> Option<bool> {
        self.settle(now);
        match (area, addr) {
            (Area::Coil, 0..=2) => Some(false),
            (Area::DiscreteInput, 0) => Some(self.moving(now)),
            (Area::DiscreteInput, 1) => Some(self.fault(now)),
            _ => None,
        }
    }

    /// Holding 0–1 target, 2–3 position (high word first).
    pub fn word(&mut self, now: Instant, area: Area, addr: u16) -> Option<u16> {
        let (hi, lo) = split(raw(self.position(now)));
        let (thi, tlo) = split(self.target_raw);
        match (area, addr) {
            (Area::Holding, 0) => Some(thi),
            (Area::Holding, 1) => Some(tlo),
            (Area::Holding, 2) => Some(hi),
            (Area::Holding, 3) => Some(lo),
            _ => None,
        }
    }

    /// Target words (refused with exception 3 if the result leaves travel), or command coils
    /// applied in address order; writing true triggers, false does nothing.
    pub fn write(&mut self, now: Instant, write: &Write) -> Result<(), Exception> {
        match write {
            Write::Registers { start, values } if within(write, Area::Holding, 0..2) => {
                let (mut hi, mut lo) = split(self.target_raw);
                for (addr, v) in (*start..).zip(values) {
                    if addr == 0 { hi = *v } else { lo = *v }
                }
                let candidate = ((u32::from(hi) << 16) | u32::from(lo)) as i32;
                let [min, max] = self.opts.travel_mm;
                if !(raw(min)..=raw(max)).contains(&candidate) {
                    return Err(Exception::ILLEGAL_DATA_VALUE);
                }
                self.target_raw = candidate;
                Ok(())
            }
            Write::Coils { start, values } if within(write, Area::Coil, 0..3) => {
                for (addr, on) in (*start..).zip(values) {
                    match (addr, on) {
                        (0, true) => self.start(now),
                        (1, true) => self.stop(now),
                        (2, true) => {
                            self.settle(now);
                            self.fault = false;
                        }
                        _ => {}
                    }
                }
                Ok(())
            }
            _ => Err(Exception::ILLEGAL_DATA_ADDRESS),
        }
    }

    /// Position, target, moving and fault.
    pub fn peek(&self, now: Instant) -> SimState {
        SimState {
            model: "stepper",
            coils: vec![false; 3],
            target_mm: Some(f64::from(self.target_raw) / 100.0),
            position_mm: Some(self.position(now)),
            moving: Some(self.moving(now)),
            fault: Some(self.fault(now)),
            ..SimState::default()
        }
    }
}

/// Millimetres as the i32 register value in 0.01 mm (travel is validated to fit).
fn raw(mm: f64) -> i32 {
    (mm * 100.0)
        .round()
        .clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32
}

/// An i32 as (high word, low word).
fn split(v: i32) -> (u16, u16) {
    let u = v as u32;
    ((u >> 16) as u16, u as u16)
}
