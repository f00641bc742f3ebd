//! `sensor`: input 0 = value × 10 (42.0 reads 420), plus uniform noise in ±`noise`.
//!
//! The sensor is the read-only case: nothing to command, a signal to cache and age. Its noise
//! comes from a seeded PRNG so that a test that sees 421 sees it again on every run.

use super::{SimState, tenths};
use crate::model::SensorOptions;
use crate::rng::Rng;
use closedloop_contract::Area;

/// A constant reading with optional noise.
#[derive(Debug)]
pub(crate) struct Sensor {
    opts: SensorOptions,
    /// Drawn once per read of input 0 when `noise > 0`.
    rng: Rng,
}

impl Sensor {
    /// A sensor whose noise sequence depends only on `seed`.
    pub fn new(opts: SensorOptions, seed: u64) -> Sensor {
        Sensor {
            opts,
            rng: Rng::new(seed),
        }
    }

    /// Input 0, in tenths, with fresh noise at every read.
    pub fn word(&mut self, area: Area, addr: u16) -> Option<u16> {
        if (area, addr) != (Area::Input, 0) {
            return None;
        }
        let noise = if self.opts.noise > 0.0 {
            (self.rng.next_f64() * 2.0 - 1.0) * self.opts.noise
        } else {
            0.0
        };
        Some(tenths(self.opts.value + noise))
    }

    /// The noiseless value.
    pub fn peek(&self) -> SimState {
        SimState {
            model: "sensor",
            value: Some(self.opts.value),
            ..SimState::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sensor(value: f64, noise: f64, seed: u64) -> Sensor {
        Sensor::new(SensorOptions { value, noise }, seed)
    }

    #[test]
    fn reads_value_times_ten_and_negative_values_as_i16() {
        assert_eq!(sensor(42.0, 0.0, 1).word(Area::Input, 0), Some(420));
        assert_eq!(
            sensor(-1.5, 0.0, 1).word(Area::Input, 0),
            Some((-15i16) as u16)
        );
        assert_eq!(sensor(42.0, 0.0, 1).word(Area::Input, 1), None);
        assert_eq!(sensor(42.0, 0.0, 1).word(Area::Holding, 0), None);
    }

    #[test]
    fn noise_stays_in_bounds_and_repeats_with_the_seed() {
        let mut a = sensor(42.0, 1.0, 9);
        let mut b = sensor(42.0, 1.0, 9);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..500 {
            let x = a.word(Area::Input, 0);
            assert_eq!(x, b.word(Area::Input, 0));
            let x = x.map_or(0, |w| w as i16);
            assert!((410..=430).contains(&x), "{x}");
            seen.insert(x);
        }
        assert!(seen.len() > 10, "noise should vary: {seen:?}");
    }
}
