//! What the engine shows: a command's result object (`result`) and the words of its outcome
//! (`detail`), the results of recently finished commands kept in memory (`finished`), the
//! devices' pages and states (`devices`) and what a state says in words (`state_text`).

pub mod detail;
pub(crate) mod devices;
pub(crate) mod finished;
pub(crate) mod result;
pub(crate) mod state_text;
