//! A TCP proxy a test controls, to cut one gateway's link to PostgreSQL while the rest of the
//! machine still reaches it: every byte is copied both ways until `cut`, which closes every
//! connection and refuses new ones until `mend`.

use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A running proxy to one upstream address.
pub struct Proxy {
    /// `127.0.0.1:PORT` to connect to instead of the upstream.
    pub addr: String,
    cut: Arc<watch::Sender<bool>>,
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
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let mut is_cut = cuts.subscribe();
                if *is_cut.borrow() {
                    drop(client);
                    continue;
                }
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = pipe(client, server) => {}
                        _ = is_cut.wait_for(|c| *c) => {}
                    }
                });
            }
        });
        Proxy { addr, cut }
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
