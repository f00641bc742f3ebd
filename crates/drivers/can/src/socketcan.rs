//! SocketCAN (Linux network interfaces such as `can0`) as a [`CanBus`] task, through the
//! `socketcan` crate. Classic frames only, like slcan. The interface's bitrate is the kernel's
//! (`ip link set can0 type can bitrate 500000`); closedloop does not change it.

use std::sync::atomic::Ordering::Relaxed;

use socketcan::tokio::CanSocket;
use socketcan::{CanFrame, EmbeddedFrame, ExtendedId, Id, StandardId};

use crate::bus::{CanBus, TaskEnds};
use crate::error::{BusError, FrameError};
use crate::frame::Frame;

/// Opens a SocketCAN interface by name and serves it in a spawned task.
pub(crate) fn open(name: &str) -> Result<CanBus, BusError> {
    let interface = format!("socketcan:{name}");
    let socket = CanSocket::open(name).map_err(|e| BusError::Open {
        interface: interface.clone(),
        reason: e.to_string(),
    })?;
    let (bus, ends) = CanBus::channels(interface.clone());
    tokio::spawn(serve(interface, socket, ends));
    Ok(bus)
}

/// closedloop's frame as the socketcan crate's.
fn to_socketcan(frame: &Frame) -> Result<CanFrame, FrameError> {
    frame.validate()?;
    let bad_id = || FrameError::Id {
        id: frame.id,
        extended: frame.extended,
    };
    let id: Id = if frame.extended {
        ExtendedId::new(frame.id).ok_or_else(bad_id)?.into()
    } else {
        let id = u16::try_from(frame.id).map_err(|_| bad_id())?;
        StandardId::new(id).ok_or_else(bad_id)?.into()
    };
    let built = if frame.rtr {
        CanFrame::new_remote(id, frame.data.len())
    } else {
        CanFrame::new(id, &frame.data)
    };
    built.ok_or(FrameError::TooLong {
        len: frame.data.len(),
    })
}

/// The socketcan crate's frame as closedloop's; `None` for error frames (bus errors reported
/// by the controller, counted as line errors).
fn from_socketcan(frame: &CanFrame) -> Option<Frame> {
    if matches!(frame, CanFrame::Error(_)) {
        return None;
    }
    let (id, extended) = match frame.id() {
        Id::Standard(id) => (u32::from(id.as_raw()), false),
        Id::Extended(id) => (id.as_raw(), true),
    };
    let rtr = frame.is_remote_frame();
    let data = if rtr {
        vec![0; frame.dlc()]
    } else {
        frame.data().to_vec()
    };
    Some(Frame {
        id,
        extended,
        rtr,
        data,
    })
}

async fn serve(interface: String, socket: CanSocket, mut ends: TaskEnds) {
    let closed = |reason: String| BusError::Closed {
        interface: interface.clone(),
        reason,
    };
    let error = loop {
        tokio::select! {
            read = socket.read_frame() => match read {
                Ok(frame) => match from_socketcan(&frame) {
                    Some(f) => {
                        ends.shared.received.fetch_add(1, Relaxed);
                        let _ = ends.frames.send(f);
                    }
                    None => {
                        ends.shared.line_errors.fetch_add(1, Relaxed);
                    }
                },
                Err(e) => break closed(format!("reading: {e}")),
            },
            req = ends.requests.recv() => {
                let Some(req) = req else { break closed("the bus was shut down".into()) };
                let frame = match to_socketcan(&req.frame) {
                    Ok(f) => f,
                    Err(e) => {
                        let _ = req.reply.send(Err(e.into()));
                        continue;
                    }
                };
                match socket.write_frame(frame).await {
                    Ok(()) => {
                        ends.shared.sent.fetch_add(1, Relaxed);
                        let _ = req.reply.send(Ok(()));
                    }
                    // ENOBUFS and the like: the kernel refused this frame; the socket lives on.
                    Err(e) => {
                        let _ = req.reply.send(Err(BusError::Refused {
                            interface: interface.clone(),
                            what: format!("frame {:#x}: {e}", req.frame.id),
                        }));
                    }
                }
            }
        }
    };
    ends.shared.close(error.clone());
    ends.requests.close();
    while let Ok(req) = ends.requests.try_recv() {
        let _ = req.reply.send(Err(error.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_convert_both_ways() {
        let mut remote = Frame::data(0x1FFF_FFFF, true, [0; 3]);
        remote.rtr = true;
        for f in [
            Frame::data(0x123, false, [1, 2, 3]),
            Frame::data(0x7FF, false, []),
            Frame::data(0x18DA_F110, true, [0xFF; 8]),
            remote,
        ] {
            let sc = to_socketcan(&f).unwrap();
            assert_eq!(from_socketcan(&sc), Some(f));
        }
        assert!(to_socketcan(&Frame::data(0x800, false, [])).is_err());
        assert!(to_socketcan(&Frame::data(1, false, [0; 9])).is_err());
    }

    #[tokio::test]
    async fn a_missing_interface_is_an_open_error() {
        let e = open("nosuchcan9").unwrap_err().to_string();
        assert!(e.starts_with("socketcan:nosuchcan9: cannot open"), "{e}");
    }
}
