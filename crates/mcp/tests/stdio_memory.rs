//! The regression: rmcp's stdio transport encoded every answer into one write buffer that kept
//! the capacity of the largest answer for the rest of the session (32 MiB after a hall's
//! `tools/list`). Counted here with an allocator that tracks live bytes: after a 4 MiB answer
//! is written and read, what the transport holds is back to what it held before.

use closedloop_mcp::stdio::StdioTransport;
use rmcp::RoleServer;
use rmcp::model::{CallToolResult, ContentBlock, NumberOrString, ServerResult};
use rmcp::service::TxJsonRpcMessage;
use rmcp::transport::Transport;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use tokio::io::AsyncReadExt;

/// Bytes allocated and not yet freed, by the whole test process.
static LIVE: AtomicIsize = AtomicIsize::new(0);

/// The system allocator, counting live bytes.
struct Counting;

// SAFETY: every call is forwarded to the system allocator unchanged; the counter is only
// arithmetic on the sizes the caller passes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's layout contract is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc`/`realloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: as for `alloc` and `dealloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const ANSWER: usize = 4 << 20;

#[tokio::test(flavor = "current_thread")]
async fn a_large_answer_leaves_no_buffer_behind() {
    let (_client_out, server_in) = tokio::io::duplex(4096);
    let (server_out, mut client_in) = tokio::io::duplex(64 * 1024);
    let mut transport = StdioTransport::new(server_in, server_out);
    let reading = tokio::spawn(async move {
        let mut chunk = vec![0u8; 64 * 1024];
        let mut total = 0;
        // Until the answer's line ends.
        loop {
            match client_in.read(&mut chunk).await {
                Ok(0) | Err(_) => return total,
                Ok(n) => {
                    total += n;
                    if chunk[n - 1] == b'\n' {
                        return total;
                    }
                }
            }
        }
    });
    let before = LIVE.load(Ordering::Relaxed);
    let text = "x".repeat(ANSWER);
    let answer = TxJsonRpcMessage::<RoleServer>::response(
        ServerResult::CallToolResult(CallToolResult::success(vec![ContentBlock::text(text)])),
        NumberOrString::Number(1),
    );
    transport.send(answer).await.expect("sent");
    assert!(reading.await.expect("read") >= ANSWER);
    let held = LIVE.load(Ordering::Relaxed) - before;
    assert!(
        held < 256 * 1024,
        "{held} bytes still held after a {ANSWER}-byte answer was written"
    );
    drop(transport);
}
