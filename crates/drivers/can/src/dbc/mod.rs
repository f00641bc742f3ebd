//! DBC files: [`Dbc::load`] parses one (with `can-dbc`) into closedloop's own [`Message`]
//! model; [`crate::decode`] and [`crate::encode`] work on that model.

mod load;
pub(crate) mod model;

pub use load::Dbc;
pub use model::{ByteOrder, MAX_SIZE, Message, Mux, Signal, Unsupported};
