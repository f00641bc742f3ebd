//! `tools/list` answers from bytes serialised once.
//!
//! A plant's tool list does not change while `serve` runs, yet a client may ask for it often
//! (some ask before every turn). Serialising it is most of what a `tools/list` costs: every
//! tool's schema is a tree of maps and strings escaped a byte at a time. The handler still
//! builds the list (the tools a caller's token may see, shaped by rmcp for the protocol version
//! the client speaks); here a list equal to one already written is not serialised again, its
//! bytes are. Equality is cheap: the schemas are shared `Arc`s, compared by address first.
//!
//! Only lists up to [`MAX_BYTES`] are kept: a hall's list (18.5 MB for 8,000 relays) would
//! outweigh every relay's own share of memory, and is asked once a session anyway.

use rmcp::RoleServer;
use rmcp::model::{JsonRpcMessage, JsonRpcResponse, ListToolsResult, ServerResult};
use rmcp::service::TxJsonRpcMessage;
use std::sync::Arc;

/// The largest list kept serialised (a plant of about 400 relays).
pub(super) const MAX_BYTES: usize = 1 << 20;

/// Lists kept: one per protocol shape and token a session meets (a stdio session has one).
const MAX_LISTS: usize = 4;

/// Serialised `tools/list` results, each beside the result it was serialised from.
#[derive(Default)]
pub(super) struct Listings {
    kept: Vec<(ListToolsResult, Arc<[u8]>)>,
    /// Where the next list goes once `kept` is full (the oldest first).
    next: usize,
}

impl Listings {
    /// `item` as one line ending in `\n`: a `tools/list` answer from its kept bytes, anything
    /// else serialised as it is.
    pub(super) fn line(
        &mut self,
        item: &TxJsonRpcMessage<RoleServer>,
    ) -> serde_json::Result<Vec<u8>> {
        let JsonRpcMessage::Response(JsonRpcResponse {
            id,
            result: ServerResult::ListToolsResult(list),
            ..
        }) = item
        else {
            let mut line = serde_json::to_vec(item)?;
            line.push(b'\n');
            return Ok(line);
        };
        let body = self.body(list)?;
        // The shape serde gives a response: `jsonrpc`, `id`, `result`, in that order.
        let mut line = Vec::with_capacity(body.len() + 64);
        line.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        serde_json::to_writer(&mut line, id)?;
        line.extend_from_slice(br#","result":"#);
        line.extend_from_slice(&body);
        line.extend_from_slice(b"}\n");
        Ok(line)
    }

    /// `list` serialised: the kept bytes of an equal list, or new ones (kept if small enough).
    fn body(&mut self, list: &ListToolsResult) -> serde_json::Result<Arc<[u8]>> {
        if let Some((_, bytes)) = self.kept.iter().find(|(kept, _)| kept == list) {
            return Ok(Arc::clone(bytes));
        }
        let bytes: Arc<[u8]> = serde_json::to_vec(list)?.into();
        if bytes.len() <= MAX_BYTES {
            let entry = (list.clone(), Arc::clone(&bytes));
            if self.kept.len() < MAX_LISTS {
                self.kept.push(entry);
            } else {
                self.kept[self.next] = entry;
                self.next = (self.next + 1) % MAX_LISTS;
            }
        }
        Ok(bytes)
    }

    /// How many lists are kept (tests).
    #[cfg(test)]
    pub(super) fn kept(&self) -> usize {
        self.kept.len()
    }
}

#[cfg(test)]
mod tests;
