//! How a `Driver` read or write becomes one Modbus [`Request`] (the PDU type of [`crate::pdu`]),
//! and the answer it expects: the function codes the `Driver` trait needs (FC01–06, FC15, FC16)
//! and nothing more.
//!
//! Both transports (tokio-modbus over TCP, closedloop's own RTU framing) translate from these
//! types, so the choice of function code — FC05 vs FC15, FC06 vs FC16 — is made once, here, and
//! a request the specification's limits refuse is never sent.

use closedloop_contract::{Area, Data, Exception, Write};

pub use crate::pdu::Request;

/// The successful answer to a [`Request`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A read's payload, exactly as many items as asked for.
    Data(Data),
    /// A write's echo matched the request.
    Written,
}

impl Request {
    /// A read, refused before anything is sent when it is empty or larger than one PDU holds.
    pub fn read(area: Area, start: u16, count: u16) -> Result<Request, String> {
        not_sent(Request::Read { area, start, count })
    }

    /// A write: one item goes as FC05/FC06, several as FC15/FC16 — one request either way, so
    /// a multi-register value never lands half-written.
    pub fn write(w: Write) -> Result<Request, String> {
        not_sent(match w {
            Write::Coils { start, values } if values.len() == 1 => Request::WriteCoil {
                addr: start,
                value: values[0],
            },
            Write::Coils { start, values } => Request::WriteCoils { start, values },
            Write::Registers { start, values } if values.len() == 1 => Request::WriteRegister {
                addr: start,
                value: values[0],
            },
            Write::Registers { start, values } => Request::WriteRegisters { start, values },
        })
    }
}

/// The request if it passes the PDU limits, else why it is not sent (a device would answer it
/// with exception 2 or 3, but it is the request that is wrong, not the device).
fn not_sent(req: Request) -> Result<Request, String> {
    let area = match &req {
        Request::Read { area, .. } => *area,
        Request::WriteCoil { .. } | Request::WriteCoils { .. } => Area::Coil,
        Request::WriteRegister { .. } | Request::WriteRegisters { .. } => Area::Holding,
    };
    let (n, start) = (req.quantity(), req.start());
    match req.check() {
        Ok(()) => Ok(req),
        Err(Exception::ILLEGAL_DATA_ADDRESS) => Err(format!(
            "not sent: {area}:{start} + {n} runs past address 65535"
        )),
        Err(_) => {
            let (verb, what) = if req.is_write() {
                ("write", "carry")
            } else {
                ("read", "ask for")
            };
            Err(format!(
                "not sent: a {area} {verb} must {what} 1 to {} items, not {n}",
                req.max_quantity()
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_item_goes_single_several_go_multiple() {
        let one = Request::write(Write::Coils {
            start: 3,
            values: vec![true],
        });
        assert_eq!(one.map(|r| r.function()), Ok(0x05));
        let two = Request::write(Write::Coils {
            start: 3,
            values: vec![true, false],
        });
        assert_eq!(two.map(|r| r.function()), Ok(0x0F));
        let one = Request::write(Write::Registers {
            start: 0,
            values: vec![7],
        });
        assert_eq!(one.map(|r| r.function()), Ok(0x06));
        let wide = Request::write(Write::Registers {
            start: 0,
            values: vec![1, 2, 3, 4],
        });
        assert_eq!(wide.map(|r| r.function()), Ok(0x10));
    }

    #[test]
    fn reads_pick_their_function_and_refuse_impossible_sizes() {
        let f = |a| Request::read(a, 0, 1).map(|r| r.function());
        assert_eq!(f(Area::Coil), Ok(1));
        assert_eq!(f(Area::DiscreteInput), Ok(2));
        assert_eq!(f(Area::Holding), Ok(3));
        assert_eq!(f(Area::Input), Ok(4));
        assert!(Request::read(Area::Holding, 0, 0).is_err());
        assert!(Request::read(Area::Holding, 0, 126).is_err());
        assert!(Request::read(Area::Coil, 0, 2000).is_ok());
        assert!(Request::read(Area::Holding, 65535, 2).is_err());
        assert!(
            Request::write(Write::Registers {
                start: 0,
                values: vec![]
            })
            .is_err()
        );
    }
}
