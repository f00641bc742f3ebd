//! One Modbus request as closedloop issues it, and the answer it expects: the function codes the
//! `Driver` trait needs (FC01–06, FC15, FC16) and nothing more.
//!
//! Both transports (tokio-modbus over TCP, closedloop's own RTU framing) translate from these
//! types, so the choice of function code — FC05 vs FC15, FC06 vs FC16 — is made once, here.

use closedloop_driver::{Area, Data, Write};

/// Most coils or discrete inputs one read may ask for (Modbus application protocol §6.1/6.2).
pub const MAX_READ_BITS: u16 = 2000;
/// Most registers one read may ask for (§6.3/6.4).
pub const MAX_READ_WORDS: u16 = 125;
/// Most coils one FC15 request may carry (§6.11).
pub const MAX_WRITE_BITS: usize = 1968;
/// Most registers one FC16 request may carry (§6.12).
pub const MAX_WRITE_WORDS: usize = 123;

/// A request, already reduced to one function code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// FC01 / FC02 / FC03 / FC04.
    Read { area: Area, start: u16, count: u16 },
    /// FC05: one coil.
    WriteCoil { addr: u16, value: bool },
    /// FC15: several coils.
    WriteCoils { start: u16, values: Vec<bool> },
    /// FC06: one register.
    WriteRegister { addr: u16, value: u16 },
    /// FC16: several registers (a 32-bit or wider value is always one such block).
    WriteRegisters { start: u16, values: Vec<u16> },
}

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
        let max = if area.is_bit() {
            MAX_READ_BITS
        } else {
            MAX_READ_WORDS
        };
        if count == 0 || count > max {
            return Err(format!(
                "not sent: a {area} read must ask for 1 to {max} items, not {count}"
            ));
        }
        if u32::from(start) + u32::from(count) > 0x1_0000 {
            return Err(format!(
                "not sent: {area}:{start} + {count} runs past address 65535"
            ));
        }
        Ok(Request::Read { area, start, count })
    }

    /// A write: one item goes as FC05/FC06, several as FC15/FC16 — one request either way, so
    /// a multi-register value never lands half-written.
    pub fn write(w: Write) -> Result<Request, String> {
        let (len, max) = match &w {
            Write::Coils { values, .. } => (values.len(), MAX_WRITE_BITS),
            Write::Registers { values, .. } => (values.len(), MAX_WRITE_WORDS),
        };
        if len == 0 || len > max {
            return Err(format!(
                "not sent: a {} write must carry 1 to {max} items, not {len}",
                w.area()
            ));
        }
        if u32::from(w.start()) + len as u32 > 0x1_0000 {
            return Err(format!(
                "not sent: {}:{} + {len} runs past address 65535",
                w.area(),
                w.start()
            ));
        }
        Ok(match w {
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

    /// The Modbus function code this request is sent with.
    pub fn function(&self) -> u8 {
        match self {
            Request::Read { area, .. } => match area {
                Area::Coil => 0x01,
                Area::DiscreteInput => 0x02,
                Area::Holding => 0x03,
                Area::Input => 0x04,
            },
            Request::WriteCoil { .. } => 0x05,
            Request::WriteRegister { .. } => 0x06,
            Request::WriteCoils { .. } => 0x0F,
            Request::WriteRegisters { .. } => 0x10,
        }
    }

    /// Whether this request may change the device (decides nothing here; kept for logs).
    pub fn is_write(&self) -> bool {
        !matches!(self, Request::Read { .. })
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
