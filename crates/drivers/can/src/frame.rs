//! The CAN frame as transports carry it.

use crate::error::FrameError;

/// One classic CAN frame, the unit every transport sends and receives.
///
/// For a remote frame (`rtr`), `data` holds as many zero bytes as the requested length (its
/// DLC): only its length means anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The identifier: 11 bits when `!extended`, 29 bits when `extended`.
    pub id: u32,
    /// A 29-bit identifier.
    pub extended: bool,
    /// A remote transmission request rather than a data frame.
    pub rtr: bool,
    /// The payload, 0–8 bytes.
    pub data: Vec<u8>,
}

impl Frame {
    /// A data frame.
    pub fn data(id: u32, extended: bool, data: impl Into<Vec<u8>>) -> Frame {
        Frame {
            id,
            extended,
            rtr: false,
            data: data.into(),
        }
    }

    /// Checks that classic CAN can carry the frame: the id fits its format, at most 8 bytes.
    pub fn validate(&self) -> Result<(), FrameError> {
        let max = if self.extended { 0x1FFF_FFFF } else { 0x7FF };
        if self.id > max {
            return Err(FrameError::Id {
                id: self.id,
                extended: self.extended,
            });
        }
        if self.data.len() > 8 {
            return Err(FrameError::TooLong {
                len: self.data.len(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_lengths_are_checked() {
        assert!(Frame::data(0x7FF, false, [0; 8]).validate().is_ok());
        assert_eq!(
            Frame::data(0x800, false, []).validate(),
            Err(FrameError::Id {
                id: 0x800,
                extended: false
            })
        );
        assert!(Frame::data(0x800, true, []).validate().is_ok());
        assert!(Frame::data(0x2000_0000, true, []).validate().is_err());
        assert_eq!(
            Frame::data(1, false, [0; 9]).validate(),
            Err(FrameError::TooLong { len: 9 })
        );
    }
}
