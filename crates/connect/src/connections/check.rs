//! A CAN device checked against its DBC at load (`closedloop check` builds the drivers too): a
//! message or signal the DBC lacks, or a CAN FD frame, is refused naming the device and the key,
//! not found at the first command.

use super::driver_error;
use crate::ConnectError;
use closedloop_plant::{Device, Source, WriteEntry};

/// Every CAN signal and write of a device must name a message and signals its DBC has, so that a
/// typo is refused at load (`closedloop check`), not at the first command.
pub(super) fn check_can(d: &Device, dbc: &closedloop_can::Dbc) -> Result<(), ConnectError> {
    let fail = |key: String, message: String| driver_error(d, format!("{key}: {message}"));
    let missing = |signal: &str, m: &closedloop_can::Message| {
        format!(
            "{} has no signal {signal:?} in message {}",
            dbc.file(),
            m.name()
        )
    };
    for s in &d.signals {
        if let Source::Can {
            message, signal, ..
        } = &s.source
        {
            let key = format!("signals.{}", s.name);
            let m = crate::can::find_message(dbc, message).map_err(|e| fail(key.clone(), e))?;
            if m.signal(signal).is_none() {
                return Err(fail(key, missing(signal, m)));
            }
        }
    }
    for a in &d.actions {
        for (plan, entries) in [("write", &a.write), ("cancel", &a.cancel)] {
            for e in entries.iter() {
                let WriteEntry::Can {
                    message, signals, ..
                } = e
                else {
                    continue;
                };
                let key = format!("action {}: {plan}", a.name);
                let m = crate::can::find_message(dbc, message).map_err(|e| fail(key.clone(), e))?;
                if let Some((name, _)) = signals.iter().find(|(n, _)| m.signal(n).is_none()) {
                    return Err(fail(key, missing(name, m)));
                }
                if m.fd() || m.size() > 8 {
                    return Err(fail(
                        key,
                        format!(
                            "message {} is a CAN FD frame; slcan and SocketCAN here carry classic frames of up to 8 bytes",
                            m.name()
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}
