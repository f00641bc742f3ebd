//! Where a device is reached: an MQTT broker URL, an OPC UA security mode, a CAN interface. The
//! plant file writes them as strings and the plant loader parses them here, once; the protocol
//! crates take these typed values, so no string is parsed a second time and a mistake is refused
//! at load with its key named. Here, not in the plant crate, because the protocol crates need the
//! types and must not depend on the plant.

use std::fmt;

/// An MQTT broker: `mqtt://host:1883` (or `tcp://`) plain, `mqtts://host:8883` (or `ssl://`)
/// over TLS. The port defaults to 1883 (8883 with TLS); an IPv6 literal is written in brackets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerUrl {
    /// Host name or IP address (an IPv6 literal without its brackets); with TLS it is also the
    /// name the broker's certificate must carry.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// `mqtts://` or `ssl://`.
    pub tls: bool,
    /// As the plant file wrote it, for messages that quote the file.
    written: String,
}

/// The schemes of a broker URL, with whether they mean TLS and their default port.
const SCHEMES: [(&str, bool, u16); 4] = [
    ("mqtt://", false, 1883),
    ("tcp://", false, 1883),
    ("mqtts://", true, 8883),
    ("ssl://", true, 8883),
];

impl BrokerUrl {
    /// Parses a broker URL; the error says how to write one.
    pub fn parse(url: &str) -> Result<BrokerUrl, String> {
        let bad = |why: &str| format!("\"{url}\" is not a broker URL: {why}");
        let (rest, tls, default_port) = SCHEMES
            .iter()
            .find_map(|(scheme, tls, port)| Some((url.strip_prefix(scheme)?, *tls, *port)))
            .ok_or_else(|| {
                bad("write it as \"mqtt://host:1883\", or \"mqtts://host:8883\" for TLS")
            })?;
        let rest = rest.trim_end_matches('/');
        if rest.is_empty() || rest.contains('/') || rest.contains('@') {
            return Err(bad(
                "write it as \"mqtt://host:1883\" (no path; credentials go in username and password)",
            ));
        }
        let (host, port) = match rest.rsplit_once(':') {
            // `[::1]` alone: the colons are inside the brackets, no port given.
            Some(_) if rest.starts_with('[') && rest.ends_with(']') => (rest, default_port),
            Some((host, port)) if !host.is_empty() => {
                let port = port
                    .parse::<u16>()
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| bad("the port is not a number 1–65535"))?;
                (host, port)
            }
            Some(_) => return Err(bad("the host is missing")),
            None => (rest, default_port),
        };
        Ok(BrokerUrl {
            host: host.trim_matches(['[', ']']).to_string(),
            port,
            tls,
            written: url.to_string(),
        })
    }

    /// The URL as the plant file wrote it.
    pub fn as_written(&self) -> &str {
        &self.written
    }

    /// One name per broker however its URL is written (`mqtt://h` and `tcp://h:1883` are one
    /// broker): devices on one broker share one connection, or the broker would drop one client
    /// for the other.
    pub fn key(&self) -> String {
        let scheme = if self.tls { "mqtts" } else { "mqtt" };
        match self.host.contains(':') {
            true => format!("{scheme}://[{}]:{}", self.host, self.port),
            false => format!("{scheme}://{}:{}", self.host, self.port),
        }
    }
}

impl fmt::Display for BrokerUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.written)
    }
}

/// An OPC UA session's security: none, or Basic256Sha256 signed (and encrypted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpcuaSecurity {
    /// No signing, no encryption.
    None,
    /// Basic256Sha256, messages signed.
    Sign,
    /// Basic256Sha256, messages signed and encrypted.
    SignAndEncrypt,
}

impl OpcuaSecurity {
    /// Parses the plant file's `security`; the error lists the modes.
    pub fn parse(s: &str) -> Result<OpcuaSecurity, String> {
        match s {
            "none" => Ok(OpcuaSecurity::None),
            "sign" => Ok(OpcuaSecurity::Sign),
            "sign_and_encrypt" => Ok(OpcuaSecurity::SignAndEncrypt),
            other => Err(format!(
                "\"{other}\" is not a security mode; write \"none\", \"sign\" or \"sign_and_encrypt\""
            )),
        }
    }

    /// The mode as the plant file writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            OpcuaSecurity::None => "none",
            OpcuaSecurity::Sign => "sign",
            OpcuaSecurity::SignAndEncrypt => "sign_and_encrypt",
        }
    }
}

impl fmt::Display for OpcuaSecurity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The interface a CAN bus is reached through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CanInterface {
    /// `socketcan:can0`: a Linux SocketCAN network interface (its bitrate is set with `ip link`).
    SocketCan(String),
    /// `slcan:/dev/ttyACM0`: a USB-CAN adapter speaking slcan on a serial port.
    Slcan(String),
}

impl CanInterface {
    /// Parses `socketcan:NAME` or `slcan:PORT`; the error says how to write one.
    pub fn parse(s: &str) -> Result<CanInterface, String> {
        let bad = |why: &str| format!("\"{s}\" is not a CAN interface: {why}");
        if let Some(name) = s.strip_prefix("socketcan:") {
            // IFNAMSIZ is 16 bytes with the terminating NUL.
            if name.is_empty() || name.len() > 15 || name.contains(['/', ' ']) {
                return Err(bad(
                    "a SocketCAN interface name is 1-15 characters, e.g. \"socketcan:can0\"",
                ));
            }
            return Ok(CanInterface::SocketCan(name.to_string()));
        }
        if let Some(path) = s.strip_prefix("slcan:") {
            if path.is_empty() {
                return Err(bad(
                    "name the adapter's serial port, e.g. \"slcan:/dev/ttyACM0\"",
                ));
            }
            return Ok(CanInterface::Slcan(path.to_string()));
        }
        Err(bad("write \"socketcan:can0\" or \"slcan:/dev/ttyACM0\""))
    }
}

impl fmt::Display for CanInterface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CanInterface::SocketCan(name) => write!(f, "socketcan:{name}"),
            CanInterface::Slcan(path) => write!(f, "slcan:{path}"),
        }
    }
}

/// The parity of a serial line (`modbus-rtu`), as the plant writes it: `"N"`, `"E"` or `"O"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Parity {
    /// `"N"`.
    None,
    /// `"E"`.
    Even,
    /// `"O"`.
    Odd,
}

impl Parity {
    /// `N`, `E` or `O` (either case); `None` for anything else.
    pub fn parse(s: &str) -> Option<Parity> {
        match s {
            "N" | "n" => Some(Parity::None),
            "E" | "e" => Some(Parity::Even),
            "O" | "o" => Some(Parity::Odd),
            _ => None,
        }
    }

    /// The letter the plant file and the configuration resource show.
    pub fn letter(self) -> &'static str {
        match self {
            Parity::None => "N",
            Parity::Even => "E",
            Parity::Odd => "O",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broker_is_one_broker_however_its_url_is_written() {
        let k = |u: &str| BrokerUrl::parse(u).expect(u).key();
        assert_eq!(k("mqtt://h"), k("tcp://h:1883"));
        assert_eq!(k("mqtts://h"), k("ssl://h:8883"));
        assert_ne!(k("mqtt://h:1883"), k("mqtts://h:1883"));
        assert_ne!(k("mqtt://h:1883"), k("mqtt://h:1884"));
        assert_eq!(k("mqtt://[::1]"), "mqtt://[::1]:1883");
        assert_eq!(k("mqtt://[::1]:1990/"), "mqtt://[::1]:1990");
    }

    #[test]
    fn a_broker_url_keeps_how_it_was_written_for_messages() {
        let b = BrokerUrl::parse("tcp://broker.local").unwrap();
        assert_eq!(
            (b.host.as_str(), b.port, b.tls),
            ("broker.local", 1883, false)
        );
        assert_eq!(b.to_string(), "tcp://broker.local");
    }

    #[test]
    fn a_bad_broker_url_says_what_is_wrong() {
        for (url, says) in [
            ("http://h", "mqtts://host:8883"),
            ("mqtt://", "no path"),
            ("mqtt://u:p@h", "credentials go in username"),
            ("mqtt://h/topic", "no path"),
            ("mqtt://h:99999", "port is not a number"),
            ("mqtt://h:0", "port is not a number"),
            ("mqtt://:1883", "host is missing"),
        ] {
            let e = BrokerUrl::parse(url).unwrap_err();
            assert!(e.contains(says) && e.contains(url), "{url}: {e}");
        }
    }

    #[test]
    fn security_modes_are_the_three_the_file_may_name() {
        for m in [
            OpcuaSecurity::None,
            OpcuaSecurity::Sign,
            OpcuaSecurity::SignAndEncrypt,
        ] {
            assert_eq!(OpcuaSecurity::parse(m.as_str()), Ok(m));
        }
        let e = OpcuaSecurity::parse("Basic256").unwrap_err();
        assert!(e.contains("\"Basic256\" is not a security mode"), "{e}");
    }

    #[test]
    fn can_interfaces_parse_and_print_back() {
        for s in ["socketcan:can0", "slcan:/dev/ttyACM0"] {
            assert_eq!(CanInterface::parse(s).unwrap().to_string(), s);
        }
        for (s, says) in [
            ("socketcan:", "1-15 characters"),
            ("socketcan:averyveryverylongname", "1-15 characters"),
            ("slcan:", "serial port"),
            ("can0", "write \"socketcan:can0\""),
        ] {
            let e = CanInterface::parse(s).unwrap_err();
            assert!(e.contains(says), "{s}: {e}");
        }
    }
}
