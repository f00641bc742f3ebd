//! Standing alarms (`[[alarm]]`): each is judged every poll period on the latest values of the
//! devices its condition reads (`watch.rs`); while one is active, the devices it blocks take no command, and
//! a command running on one of them is stopped (its cancel plan written) with the alarm's name
//! as its code.

pub(crate) mod envelope;
pub(crate) mod watch;

use closedloop_plant::Alarm;
use std::collections::HashMap;
use std::sync::Mutex;

/// One alarm's state.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AlarmState {
    /// Whether it is raised.
    pub active: bool,
    /// When it was raised (RFC 3339), while active.
    pub since: Option<String>,
    /// Why, in words: the values that made it hold, or the device that went silent.
    pub why: Option<String>,
}

/// The alarms' states, in plant order, with a version that moves on every raise and clear.
///
/// Read by position wherever the caller knows it (the watchers every period, admission through
/// the index of the alarms blocking each device): a hall with an alarm per device asks for one
/// state thousands of times a second, and a copy of the board, or a search of it by name, made
/// that grow with the square of the alarms (2,000 alarms: 129 % of one core at rest).
pub struct AlarmBoard {
    states: Mutex<Vec<AlarmState>>,
    version: tokio::sync::watch::Sender<u64>,
    /// The alarms blocking each device, by position, in plant order.
    blocking: HashMap<String, Vec<usize>>,
}

impl AlarmBoard {
    /// A board with every alarm of the plant cleared.
    pub fn new(alarms: &[Alarm]) -> AlarmBoard {
        let mut blocking: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, a) in alarms.iter().enumerate() {
            for d in &a.blocks {
                let of = blocking.entry(d.clone()).or_default();
                if of.last() != Some(&i) {
                    of.push(i);
                }
            }
        }
        AlarmBoard {
            states: Mutex::new(vec![AlarmState::default(); alarms.len()]),
            version: tokio::sync::watch::channel(0).0,
            blocking,
        }
    }

    /// A receiver woken on every raise and clear.
    pub fn watch(&self) -> tokio::sync::watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// Every alarm's state, in plant order.
    pub fn states(&self) -> Vec<AlarmState> {
        self.read(<[AlarmState]>::to_vec)
    }

    /// The state of the alarm at position `i` of the plant's alarms.
    fn state_at(&self, i: usize) -> AlarmState {
        self.read(|s| s.get(i).cloned().unwrap_or_default())
    }

    /// Whether the alarm at position `i` of the plant's alarms is raised.
    fn is_active_at(&self, i: usize) -> bool {
        self.read(|s| s.get(i).is_some_and(|st| st.active))
    }

    fn read<T>(&self, f: impl FnOnce(&[AlarmState]) -> T) -> T {
        f(&self.states.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Says why the raised alarm at position `i` holds now, when that changed while it stayed
    /// raised; its subscribers hear of it as of a raise.
    pub(crate) fn explain(&self, i: usize, why: String) {
        let mut s = self.states.lock().unwrap_or_else(|p| p.into_inner());
        let Some(slot) = s.get_mut(i).filter(|st| st.active) else {
            return;
        };
        slot.why = Some(why);
        drop(s);
        self.version.send_modify(|v| *v += 1);
    }

    /// Sets the alarm at position `i`; whether it was raised or cleared by this.
    fn set(&self, i: usize, state: AlarmState) -> bool {
        let mut s = self.states.lock().unwrap_or_else(|p| p.into_inner());
        let Some(slot) = s.get_mut(i) else {
            return false;
        };
        let changed = slot.active != state.active;
        *slot = state;
        drop(s);
        if changed {
            self.version.send_modify(|v| *v += 1);
        }
        changed
    }
}

/// One alarm as `list_alarms` shows it.
#[derive(Debug, Clone, serde::Serialize, PartialEq)]
pub struct AlarmInfo {
    /// Its name (the code of a command it stops).
    pub name: String,
    /// As the plant file says.
    pub severity: String,
    /// Whether it is raised now.
    pub active: bool,
    /// When it was raised, while active.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Why, while active: the values that made it hold, or the device that went silent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// The devices it blocks.
    pub blocks: Vec<String>,
    /// Written for a model.
    pub description: String,
}

impl AlarmBoard {
    /// Every alarm of the plant (`alarms`, the plant's, which the board was made for) with its
    /// state.
    pub(crate) fn list(&self, alarms: &[Alarm]) -> Vec<AlarmInfo> {
        let states = self.states();
        (alarms.iter().zip(states))
            .map(|(a, st)| AlarmInfo {
                name: a.name.clone(),
                severity: a.severity.clone(),
                active: st.active,
                since: st.since,
                why: st.why,
                blocks: a.blocks.clone(),
                description: a.description.clone(),
            })
            .collect()
    }

    /// The plant's alarms that block `device`, in plant order, with their positions.
    fn blocking_device<'a>(
        &'a self,
        alarms: &'a [Alarm],
        device: &str,
    ) -> impl Iterator<Item = (usize, &'a Alarm)> {
        let of = self.blocking.get(device).map(Vec::as_slice);
        of.unwrap_or_default().iter().map(|&i| (i, &alarms[i]))
    }

    /// The active alarm blocking `device`, with its detail for a refusal, if any.
    pub(crate) fn blocking(&self, alarms: &[Alarm], device: &str) -> Option<(String, String)> {
        self.blocking_device(alarms, device).find_map(|(i, a)| {
            let st = self.state_at(i);
            if !st.active {
                return None;
            }
            let why = st.why.as_deref().unwrap_or("its condition holds");
            let detail = format!(
                "The {} alarm {} is active ({why}) and blocks {device}: {}",
                a.severity,
                a.name,
                a.description.trim_end_matches('.')
            );
            Some((a.name.clone(), detail))
        })
    }

    /// The names of every active alarm blocking `device` (what `get_device_state` shows).
    pub(crate) fn blocking_names(&self, alarms: &[Alarm], device: &str) -> Vec<String> {
        self.blocking_device(alarms, device)
            .filter(|&(i, _)| self.is_active_at(i))
            .map(|(_, a)| a.name.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::{AlarmBoard, AlarmState};

    const PLANT: &str = r#"
[[device]]
id = "r"
driver = { kind = "sim", model = "relay" }
[device.signals]
contact = { discrete_input = 0 }
[[alarm]]
name = "HOT"
when = "devices.r.contact"
blocks = ["r"]
[[alarm]]
name = "COLD"
when = "!devices.r.contact"
blocks = ["r"]
"#;

    #[test]
    fn each_alarm_is_read_alone_and_a_raise_moves_the_boards_version() {
        let plant = closedloop_plant::parse(PLANT, "t.toml", std::path::Path::new(".")).unwrap();
        let board = AlarmBoard::new(&plant.alarms);
        let mut version = board.watch();
        assert_eq!(board.state_at(0), AlarmState::default());
        let hot = AlarmState {
            active: true,
            since: Some("2026-12-04T17:00:00Z".into()),
            why: Some("`devices.r.contact` (devices.r.contact = true)".into()),
        };
        assert!(board.set(0, hot.clone()));
        assert!(version.has_changed().unwrap());
        assert_eq!(board.state_at(0), hot);
        assert!(board.is_active_at(0));
        assert!(!board.is_active_at(1), "COLD is not raised with HOT");
        assert_eq!(board.state_at(2), AlarmState::default(), "no third alarm");
        assert!(!board.set(2, hot.clone()), "no third alarm to raise");
        version.mark_unchanged();
        assert!(!board.set(0, hot), "raised again: no change");
        assert!(!version.has_changed().unwrap());
        assert_eq!(board.states().len(), 2);
        assert!(board.set(0, AlarmState::default()), "cleared");
        assert!(version.has_changed().unwrap());
    }

    #[test]
    fn the_alarms_blocking_a_device_are_indexed_once_each_in_plant_order() {
        let twice = PLANT.replace(r#"blocks = ["r"]"#, r#"blocks = ["r", "r"]"#);
        let plant = closedloop_plant::parse(&twice, "t.toml", std::path::Path::new("."));
        let board = AlarmBoard::new(&plant.unwrap().alarms);
        assert_eq!(board.blocking["r"], [0, 1]);
        assert!(!board.blocking.contains_key("s"));
    }
}
