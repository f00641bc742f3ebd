//! A TCP proxy a test controls, to cut one gateway's link to PostgreSQL while the rest of the
//! machine still reaches it: every byte is copied both ways until `cut`, which closes every
//! connection and refuses new ones until `mend`. It remembers the local address of every
//! connection it opened upstream, so a server's log of client addresses (the simulator's write
//! log) tells which gateway, behind which proxy, wrote.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A running proxy to one upstream address.
pub struct Proxy {
    /// `127.0.0.1:PORT` to connect to instead of the upstream.
    pub addr: String,
    cut: Arc<watch::Sender<bool>>,
    upstream_locals: Arc<Mutex<Vec<SocketAddr>>>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards each connection to `upstream`.
    pub async fn start(upstream: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (cut, _) = watch::channel(false);
        let cut = Arc::new(cut);
        let upstream = upstream.to_string();
        let cuts = Arc::clone(&cut);
        let upstream_locals = Arc::new(Mutex::new(Vec::new()));
        let locals = Arc::clone(&upstream_locals);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let mut is_cut = cuts.subscribe();
                if *is_cut.borrow() {
                    drop(client);
                    continue;
                }
                let upstream = upstream.clone();
                let locals = Arc::clone(&locals);
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    if let Ok(local) = server.local_addr() {
                        locals.lock().unwrap().push(local);
                    }
                    tokio::select! {
                        _ = pipe(client, server) => {}
                        _ = is_cut.wait_for(|c| *c) => {}
                    }
                });
            }
        });
        Proxy {
            addr,
            cut,
            upstream_locals,
        }
    }

    /// The local address of every connection the proxy opened to its upstream so far: the
    /// client addresses the upstream saw for whoever came through this proxy.
    pub fn upstream_locals(&self) -> Vec<SocketAddr> {
        self.upstream_locals.lock().unwrap().clone()
    }

    /// Closes every connection through the proxy and refuses new ones.
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    /// Lets connections through again.
    pub fn mend(&self) {
        self.cut.send_replace(false);
    }
}

/// Copies both ways until either side closes; both are shut then.
async fn pipe(mut a: TcpStream, mut b: TcpStream) {
    let _ = tokio::io::copy_bidirectional(&mut a, &mut b).await;
    let _ = a.shutdown().await;
    let _ = b.shutdown().await;
}
