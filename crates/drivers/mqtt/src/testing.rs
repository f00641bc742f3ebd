//! A real Mosquitto for tests: started on 127.0.0.1 and a free port, killed on drop; plain, or
//! with TLS (a throwaway PKI made by the `openssl` CLI), client certificates or a password file.
//!
//! Behind the `testing` feature so that every crate's MQTT tests (this crate's, the engine's,
//! the simulator's, the CLI's) start brokers the same way instead of each keeping a copy.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

use crate::{BrokerConfig, Connection, MqttBroker};

/// Where Debian installs the broker (scripts/system-deps installs it).
pub const MOSQUITTO: &str = "/usr/sbin/mosquitto";

/// Where Debian installs the password tool that comes with the broker.
pub const MOSQUITTO_PASSWD: &str = "/usr/bin/mosquitto_passwd";

/// A Mosquitto process, killed on drop.
pub struct Mosquitto {
    /// `mqtt://127.0.0.1:PORT`, or `mqtts://127.0.0.1:PORT` with TLS.
    pub url: String,
    child: Child,
    conf: PathBuf,
    log: PathBuf,
}

impl Drop for Mosquitto {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.conf);
        let _ = std::fs::remove_file(&self.log);
    }
}

/// What a test broker's listener asks of its clients beyond the plain, anonymous default.
#[derive(Debug, Clone, Default)]
pub struct Listener {
    /// Speak TLS with this identity: the URL becomes `mqtts://`.
    pub tls: Option<ServerTls>,
    /// With TLS: refuse clients without a certificate signed by [`ServerTls::ca`] (mutual TLS).
    pub require_certificate: bool,
    /// Accept only the users of this `mosquitto_passwd` file (see [`password_file`]); no
    /// anonymous clients.
    pub password_file: Option<PathBuf>,
}

/// The files of a TLS listener (PEM).
#[derive(Debug, Clone)]
pub struct ServerTls {
    /// The CA that client certificates must be signed by.
    pub ca: PathBuf,
    /// The broker's certificate.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
}

impl Mosquitto {
    /// Starts a plain, anonymous Mosquitto and waits until its port accepts connections
    /// (bounded, no fixed sleep).
    pub async fn start() -> Mosquitto {
        Mosquitto::start_with(Listener::default()).await
    }

    /// Starts Mosquitto with `listener`'s TLS and authentication and waits until its port
    /// accepts connections. Panics with the broker's own log if it exits instead (a file it
    /// cannot read, a bad certificate).
    pub async fn start_with(listener: Listener) -> Mosquitto {
        assert!(
            Path::new(MOSQUITTO).exists(),
            "{MOSQUITTO} is missing: the MQTT integration tests need a real broker; \
             run `apt-get install mosquitto`"
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let stem = format!("closedloop-mosquitto-{port}-{}", std::process::id());
        let conf = std::env::temp_dir().join(format!("{stem}.conf"));
        let log = std::env::temp_dir().join(format!("{stem}.log"));
        let mut text = format!("listener {port} 127.0.0.1\npersistence false\n");
        match &listener.password_file {
            Some(file) => {
                text += &format!("allow_anonymous false\npassword_file {}\n", file.display())
            }
            None => text += "allow_anonymous true\n",
        }
        if let Some(tls) = &listener.tls {
            text += &format!(
                "cafile {}\ncertfile {}\nkeyfile {}\nrequire_certificate {}\n",
                tls.ca.display(),
                tls.cert.display(),
                tls.key.display(),
                listener.require_certificate
            );
        }
        std::fs::write(&conf, text).expect("write mosquitto.conf");
        let stderr = std::fs::File::create(&log).expect("create the mosquitto log");
        let mut child = Command::new(MOSQUITTO)
            .arg("-c")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .expect("spawn mosquitto");
        let addr = format!("127.0.0.1:{port}");
        tokio::time::timeout(Duration::from_secs(10), async {
            while tokio::net::TcpStream::connect(&addr).await.is_err() {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!(
                        "mosquitto exited ({status}) instead of listening:\n{}",
                        std::fs::read_to_string(&log).unwrap_or_default()
                    );
                }
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("mosquitto accepts connections within 10 s");
        let scheme = if listener.tls.is_some() {
            "mqtts"
        } else {
            "mqtt"
        };
        Mosquitto {
            url: format!("{scheme}://{addr}"),
            child,
            conf,
            log,
        }
    }

    /// Kills the broker at once (no clean shutdown): its clients see the connection drop.
    pub fn kill(&mut self) {
        let _ = self.child.start_kill();
    }

    /// A connected client handle.
    pub async fn client(&self, id: &str) -> MqttBroker {
        connected(BrokerConfig::new(&self.url, id)).await
    }
}

/// Connects and waits (bounded) for CONNACK.
pub async fn connected(config: BrokerConfig) -> MqttBroker {
    let broker = MqttBroker::connect(config).expect("valid config");
    let mut connection = broker.connection();
    tokio::time::timeout(
        Duration::from_secs(5),
        connection.wait_for(|l| *l == Connection::Connected),
    )
    .await
    .expect("connected within 5 s")
    .expect("connection watch open");
    broker
}

/// The next message on `sub` that is not a probe of [`await_active`], bounded.
pub async fn next(sub: &mut crate::Subscription) -> crate::Message {
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let m = sub.recv().await.expect("subscription open");
            if m.payload.as_ref() != b"probe" {
                return m;
            }
        }
    })
    .await
    .expect("a message within 5 s")
}

/// Waits until the subscription is active at the broker by publishing probes to `topic` until
/// one comes back (the SUBSCRIBE is asynchronous): a test that publishes before that could lose
/// its message.
pub async fn await_active(broker: &MqttBroker, sub: &mut crate::Subscription, topic: &str) {
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            // `send`, not `publish`: until the subscription is active the broker answers "No
            // matching subscribers", which a command's publish takes as not delivered.
            (broker.send(topic, "probe".into(), 1, Some(5), false))
                .await
                .expect("probe acked");
            if let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(50), sub.recv()).await
                && m.payload.as_ref() == b"probe"
            {
                return;
            }
        }
    })
    .await
    .expect("subscription active within 5 s");
}

/// Publishes a retained message (QoS 1), as a device leaves its last state behind; tests use it
/// to show that retained messages are never evidence.
pub async fn publish_retained(
    broker: &MqttBroker,
    topic: &str,
    payload: &str,
) -> Result<crate::Ack, crate::Error> {
    broker
        .send(topic, payload.to_string().into(), 1, None, true)
        .await
}

/// A throwaway PKI in a directory, made with the `openssl` CLI (EC P-256, valid two days): a CA,
/// a broker certificate for `127.0.0.1` and `localhost` (subjectAltName), one for another name
/// only, a client certificate, and a second, unrelated CA for "wrong CA" cases.
///
/// The directory and files are made world-readable: Mosquitto started as root drops to its own
/// user before it reads them.
#[derive(Debug, Clone)]
pub struct TestPki {
    /// The CA that signed `server_cert` and `client_cert`.
    pub ca: PathBuf,
    /// A CA that signed nothing here: trusting only it, no broker here can be verified.
    pub other_ca: PathBuf,
    /// The broker's certificate (SAN `IP:127.0.0.1`, `DNS:localhost`).
    pub server_cert: PathBuf,
    /// The broker's key.
    pub server_key: PathBuf,
    /// A broker certificate signed by `ca` for `elsewhere.invalid` only: whoever reaches the
    /// broker as `127.0.0.1` must refuse it (host name mismatch).
    pub misnamed_cert: PathBuf,
    /// Its key.
    pub misnamed_key: PathBuf,
    /// A client certificate (CN `closedloop`).
    pub client_cert: PathBuf,
    /// Its key, PKCS#8 PEM.
    pub client_key: PathBuf,
    dir: PathBuf,
}

const OPENSSL_CONF: &str = "\
[req]
distinguished_name = dn
prompt = no
[dn]
CN = closedloop-ca
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[server]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1,DNS:localhost
[misnamed]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:elsewhere.invalid
[client]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = clientAuth
";

impl TestPki {
    /// Generates the PKI into `dir` (which must exist). Panics — never skips — when `openssl`
    /// is missing or fails: a TLS test that does not run proves nothing.
    pub fn generate(dir: &Path) -> TestPki {
        let ok = std::process::Command::new("openssl")
            .arg("version")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "the `openssl` CLI is missing: the TLS tests make their certificates with it; \
             run `apt-get install openssl`"
        );
        readable(dir, 0o755);
        let conf = dir.join("openssl.cnf");
        std::fs::write(&conf, OPENSSL_CONF).expect("write openssl.cnf");
        let pki = TestPki {
            ca: dir.join("ca.pem"),
            other_ca: dir.join("other-ca.pem"),
            server_cert: dir.join("server.pem"),
            server_key: dir.join("server.key"),
            misnamed_cert: dir.join("misnamed.pem"),
            misnamed_key: dir.join("misnamed.key"),
            client_cert: dir.join("client.pem"),
            client_key: dir.join("client.key"),
            dir: dir.to_path_buf(),
        };
        const EC: &str = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
        // Distinct names: the other CA must be an unknown issuer, not a bad signature.
        for name in ["ca", "other-ca"] {
            pki.openssl(&format!(
                "req -x509 -new {EC} -days 2 -config openssl.cnf -extensions ca \
                 -subj /CN=closedloop-{name} -keyout {name}.key -out {name}.pem"
            ));
        }
        let leaves = [
            ("server", "localhost", 2),
            ("misnamed", "elsewhere.invalid", 3),
            ("client", "closedloop", 4),
        ];
        for (name, cn, serial) in leaves {
            pki.openssl(&format!(
                "req -new {EC} -subj /CN={cn} -keyout {name}.key -out {name}.csr"
            ));
            pki.openssl(&format!(
                "x509 -req -in {name}.csr -CA ca.pem -CAkey ca.key -set_serial {serial} -days 2 \
                 -extfile openssl.cnf -extensions {name} -out {name}.pem"
            ));
        }
        for entry in std::fs::read_dir(dir)
            .expect("list the PKI directory")
            .flatten()
        {
            readable(&entry.path(), 0o644);
        }
        pki
    }

    /// The broker side of this PKI, for [`Listener::tls`].
    pub fn server(&self) -> ServerTls {
        ServerTls {
            ca: self.ca.clone(),
            cert: self.server_cert.clone(),
            key: self.server_key.clone(),
        }
    }

    /// Runs `openssl ARGS` (split at whitespace) in the PKI directory, for tests that need more
    /// files (another key format, another name); panics with its output on failure.
    pub fn openssl(&self, args: &str) {
        let out = std::process::Command::new("openssl")
            .args(args.split_whitespace())
            .current_dir(&self.dir)
            .output()
            .expect("run openssl");
        assert!(
            out.status.success(),
            "openssl {args} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Writes a Mosquitto password file with one user, made by `mosquitto_passwd -b` (which must
/// exist: panics otherwise), readable by the broker.
pub fn password_file(dir: &Path, user: &str, password: &str) -> PathBuf {
    assert!(
        Path::new(MOSQUITTO_PASSWD).exists(),
        "{MOSQUITTO_PASSWD} is missing: the password tests need it; run `apt-get install mosquitto`"
    );
    let file = dir.join("passwords");
    let out = std::process::Command::new(MOSQUITTO_PASSWD)
        .arg("-c")
        .arg("-b")
        .arg(&file)
        .arg(user)
        .arg(password)
        .output()
        .expect("run mosquitto_passwd");
    assert!(
        out.status.success() && file.exists(),
        "mosquitto_passwd failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    readable(dir, 0o755);
    readable(&file, 0o644);
    file
}

fn readable(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .expect("make the file readable by mosquitto");
}
