//! The scripts: a few steps drawn from a seed (a small xorshift generator: the scripts are data
//! to replay, not statistics).

/// One step of a script.
#[derive(Debug, Clone, Copy)]
pub enum Step {
    /// The probe's temperature becomes this many tenths of a degree; then `hold` ms pass.
    Temp(u16, u64),
    /// Its register answers exception 4 (or reads again); then `hold` ms pass.
    Refuse(bool, u64),
    /// `relay_warm` called at a or at b.
    Warm { on: bool, at_b: bool },
}

/// Ten steps from `seed`.
pub fn script(seed: u64) -> Vec<Step> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    const TEMPS: [u16; 6] = [300, 350, 450, 550, 700, 850];
    let mut refused = false;
    (0..10)
        .map(|_| {
            let hold = 100 + 100 * next(15);
            match next(10) {
                0..=4 => Step::Temp(TEMPS[next(6) as usize], hold),
                5..=6 => {
                    refused = !refused;
                    Step::Refuse(refused, hold)
                }
                _ => Step::Warm {
                    on: next(2) == 0,
                    at_b: next(2) == 0,
                },
            }
        })
        .collect()
}
