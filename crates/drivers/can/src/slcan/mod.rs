//! slcan: the serial-line CAN protocol of common USB-CAN adapters (Lawicel, CANable and their
//! kin). [`codec`] is the protocol, pure; this module runs it over any byte stream (a serial
//! port in production, a pty or `tokio::io::duplex` in tests) as a [`CanBus`] task.

pub mod codec;

use std::collections::VecDeque;
use std::sync::atomic::Ordering::Relaxed;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::{Instant, sleep_until, timeout};

use crate::bus::{ANSWER_TIMEOUT, CanBus, Request, TaskEnds};
use crate::error::BusError;
use codec::{Decoder, Event};

/// The serial line speed used for adapters on a real UART. USB-CDC adapters ignore it.
pub const SERIAL_BAUD: u32 = 115_200;

/// Frames sent but not yet answered. Answers come back in order, so this bounds how far the
/// task runs ahead of the adapter; further sends wait in the bus queue.
const IN_FLIGHT: usize = 16;

/// How long the adapter may take to answer the `C\r` sent first. It may stay silent (some
/// firmware does not answer `C` on a closed channel), so silence here is not an error.
const CLOSE_ANSWER: std::time::Duration = std::time::Duration::from_millis(200);

/// Opens an slcan adapter on a serial port (8N1, [`SERIAL_BAUD`]) at a CAN `bitrate`.
pub(crate) async fn open_serial(path: &str, bitrate: u32) -> Result<CanBus, BusError> {
    use tokio_serial::SerialPortBuilderExt;
    let port = tokio_serial::new(path, SERIAL_BAUD)
        .data_bits(tokio_serial::DataBits::Eight)
        .parity(tokio_serial::Parity::None)
        .stop_bits(tokio_serial::StopBits::One)
        .open_native_async()
        .map_err(|e| BusError::Open {
            interface: format!("slcan:{path}"),
            reason: e.to_string(),
        })?;
    CanBus::slcan(&format!("slcan:{path}"), port, bitrate).await
}

impl CanBus {
    /// Runs slcan over `stream` (already open): closes the channel in case it was left open,
    /// sets `bitrate` (`S0`–`S8`), opens it (`O`), then serves the bus in a spawned task.
    /// `interface` names the bus in errors and logs.
    ///
    /// Fails when the bitrate has no slcan code, or the adapter refuses or does not answer
    /// the bitrate or open command within [`ANSWER_TIMEOUT`].
    pub async fn slcan<S>(interface: &str, mut stream: S, bitrate: u32) -> Result<CanBus, BusError>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let speed = codec::bitrate_command(bitrate).ok_or(BusError::Bitrate(bitrate))?;
        let mut line = Line {
            interface: interface.to_string(),
            decoder: Decoder::new(),
            backlog: VecDeque::new(),
        };
        line.write(&mut stream, codec::CLOSE, "C").await?;
        // Either answer (or none) is fine: the channel is closed now.
        let _ = line.answer(&mut stream, CLOSE_ANSWER).await;
        for (cmd, what) in [
            (speed, "the bitrate command"),
            (codec::OPEN, "the open command"),
        ] {
            let what = format!("{what} {}", String::from_utf8_lossy(&cmd[..cmd.len() - 1]));
            line.write(&mut stream, cmd, &what).await?;
            match line.answer(&mut stream, ANSWER_TIMEOUT).await? {
                Some(true) => {}
                Some(false) => {
                    return Err(BusError::Refused {
                        interface: interface.to_string(),
                        what,
                    });
                }
                None => {
                    return Err(BusError::NoAnswer {
                        interface: interface.to_string(),
                        what: format!("{what} (is it an slcan adapter?)"),
                        ms: ANSWER_TIMEOUT.as_millis() as u64,
                    });
                }
            }
        }
        let (bus, ends) = CanBus::channels(interface.to_string());
        tokio::spawn(line.serve(stream, ends));
        Ok(bus)
    }
}

/// The task's protocol state: the line decoder and the events read past an answer.
struct Line {
    interface: String,
    decoder: Decoder,
    /// Events decoded during the opening handshake after the answer it waited for.
    backlog: VecDeque<Event>,
}

impl Line {
    fn closed(&self, reason: impl Into<String>) -> BusError {
        BusError::Closed {
            interface: self.interface.clone(),
            reason: reason.into(),
        }
    }

    /// Writes `bytes` within [`ANSWER_TIMEOUT`].
    async fn write<S: AsyncWrite + Unpin>(
        &self,
        stream: &mut S,
        bytes: &[u8],
        what: &str,
    ) -> Result<(), BusError> {
        match timeout(ANSWER_TIMEOUT, async {
            stream.write_all(bytes).await?;
            stream.flush().await
        })
        .await
        {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(self.closed(format!("writing {what}: {e}"))),
            Err(_) => Err(BusError::NoAnswer {
                interface: self.interface.clone(),
                what: format!("writing {what} (the port does not take data)"),
                ms: ANSWER_TIMEOUT.as_millis() as u64,
            }),
        }
    }

    /// Reads until the adapter acks (`Some(true)`) or naks (`Some(false)`), or `wait` passes
    /// (`None`). Used only while opening, before any frame is expected.
    async fn answer<S: AsyncRead + Unpin>(
        &mut self,
        stream: &mut S,
        wait: std::time::Duration,
    ) -> Result<Option<bool>, BusError> {
        let deadline = Instant::now() + wait;
        let mut buf = [0u8; 256];
        loop {
            while let Some(e) = self.backlog.pop_front() {
                match e {
                    Event::Ack => return Ok(Some(true)),
                    Event::Nak => return Ok(Some(false)),
                    _ => {}
                }
            }
            let n = match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
                Err(_) => return Ok(None),
                Ok(Ok(0)) => return Err(self.closed("the port reached end of file")),
                Ok(Err(e)) => return Err(self.closed(format!("reading: {e}"))),
                Ok(Ok(n)) => n,
            };
            let mut events = Vec::new();
            self.decoder.push(&buf[..n], &mut events);
            self.backlog.extend(events);
        }
    }

    /// The bus task: delivers received frames, writes requested ones and matches the adapter's
    /// answers to them in order. Returns when the port fails, the adapter stops answering, or
    /// every handle is dropped; the reason is left in the shared state.
    async fn serve<S>(mut self, mut stream: S, mut ends: TaskEnds)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let mut pending: VecDeque<Pending> = VecDeque::new();
        let mut buf = [0u8; 1024];
        let mut events: Vec<Event> = self.backlog.drain(..).collect();
        let error = 'run: loop {
            self.deliver(events.drain(..), &mut pending, &ends);
            ends.shared
                .line_errors
                .store(self.decoder.errors(), Relaxed);
            let oldest = pending.front().map(|p| p.deadline);
            tokio::select! {
                read = stream.read(&mut buf) => match read {
                    Ok(0) => break 'run self.closed("the port reached end of file (adapter unplugged?)"),
                    Err(e) => break 'run self.closed(format!("reading: {e}")),
                    Ok(n) => self.decoder.push(&buf[..n], &mut events),
                },
                request = ends.requests.recv(), if pending.len() < IN_FLIGHT => {
                    let Some(request) = request else {
                        // Every handle is gone: leave the adapter closed, as we found it.
                        let _ = self.write(&mut stream, codec::CLOSE, "C").await;
                        break 'run self.closed("the bus was shut down");
                    };
                    if let Err(e) = self.transmit(&mut stream, request, &mut pending).await {
                        break 'run e;
                    }
                }
                () = sleep_until(oldest.unwrap_or_else(Instant::now)), if oldest.is_some() => {
                    let what = pending.front().map(|p| p.what.clone()).unwrap_or_default();
                    break 'run BusError::NoAnswer {
                        interface: self.interface.clone(),
                        what,
                        ms: ANSWER_TIMEOUT.as_millis() as u64,
                    };
                }
            }
        };
        fail_all(&mut ends, pending, &error);
    }

    /// Hands received frames to the listeners and settles the oldest pending frame with each
    /// ack (sent) or nak (refused); the adapter answers in order.
    fn deliver(
        &self,
        events: impl Iterator<Item = Event>,
        pending: &mut VecDeque<Pending>,
        ends: &TaskEnds,
    ) {
        for event in events {
            match event {
                Event::Frame(f) => {
                    ends.shared.received.fetch_add(1, Relaxed);
                    // No receiver is not an error: nobody is listening yet.
                    let _ = ends.frames.send(f);
                }
                Event::Ack => {
                    if let Some(p) = pending.pop_front() {
                        ends.shared.sent.fetch_add(1, Relaxed);
                        let _ = p.request.reply.send(Ok(()));
                    }
                }
                Event::Nak => {
                    if let Some(p) = pending.pop_front() {
                        let _ = p.request.reply.send(Err(BusError::Refused {
                            interface: self.interface.clone(),
                            what: p.what,
                        }));
                    }
                }
                Event::Reply(_) | Event::Invalid { .. } => {}
            }
        }
    }

    /// Writes the line of one requested frame and queues it for the adapter's answer. A frame
    /// slcan cannot carry is refused to its sender alone; a failed write is returned, and ends
    /// the line.
    async fn transmit<S: AsyncWrite + Unpin>(
        &self,
        stream: &mut S,
        request: Request,
        pending: &mut VecDeque<Pending>,
    ) -> Result<(), BusError> {
        let line = match codec::encode_frame(&request.frame) {
            Ok(line) => line,
            Err(e) => {
                let _ = request.reply.send(Err(e.into()));
                return Ok(());
            }
        };
        let what = format!("frame {}", String::from_utf8_lossy(&line[..line.len() - 1]));
        if let Err(e) = self.write(stream, &line, &what).await {
            let _ = request.reply.send(Err(e.clone()));
            return Err(e);
        }
        pending.push_back(Pending {
            request,
            deadline: Instant::now() + ANSWER_TIMEOUT,
            what,
        });
        Ok(())
    }
}

/// A frame written to the adapter and not yet answered.
struct Pending {
    request: Request,
    /// When the adapter's silence about it ends the line.
    deadline: Instant,
    /// The frame as written (`frame t123111`), for errors.
    what: String,
}

/// Ends the bus with `error`: recorded for every handle, and sent to every frame still
/// pending and every request still queued, so no caller waits on a dropped channel.
fn fail_all(ends: &mut TaskEnds, pending: VecDeque<Pending>, error: &BusError) {
    ends.shared.close(error.clone());
    for p in pending {
        let _ = p.request.reply.send(Err(error.clone()));
    }
    // Requests already queued get the same answer instead of a dropped channel.
    ends.requests.close();
    while let Ok(request) = ends.requests.try_recv() {
        let _ = request.reply.send(Err(error.clone()));
    }
}

#[cfg(test)]
mod tests;
