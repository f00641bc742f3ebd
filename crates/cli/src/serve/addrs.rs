//! The addresses `serve` listens on, announces and accepts as `Host`: this host's own
//! addresses for 0.0.0.0 / [::], read from /proc, and the lines that tell them.

use std::net::{IpAddr, SocketAddr};

/// The `Host` names a listener on `addr` accepts beyond loopback: the IP listened on, or every
/// address of this host for 0.0.0.0 / [::]. A literal IP cannot come from DNS rebinding.
pub(super) fn literal_hosts(addr: SocketAddr) -> Vec<String> {
    let ip = addr.ip();
    let ips = if ip.is_unspecified() {
        let mut all = host_addresses(ip);
        // [::] takes IPv4 connections too unless the system says v6-only (Linux's default).
        let dual =
            std::fs::read_to_string("/proc/sys/net/ipv6/bindv6only").is_ok_and(|v| v.trim() == "0");
        if addr.is_ipv6() && dual {
            all.extend(host_addresses(std::net::Ipv4Addr::UNSPECIFIED.into()));
        }
        all
    } else if ip.is_loopback() {
        Vec::new()
    } else {
        vec![ip]
    };
    ips.iter()
        .map(|ip| match ip {
            IpAddr::V4(ip) => ip.to_string(),
            IpAddr::V6(ip) => format!("[{ip}]"),
        })
        .collect()
}

/// `local` as a client reaches it: loopback for 0.0.0.0 / [::].
pub(super) fn shown_addr(local: SocketAddr) -> SocketAddr {
    match local.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => {
            (std::net::Ipv4Addr::LOCALHOST, local.port()).into()
        }
        IpAddr::V6(ip) if ip.is_unspecified() => {
            (std::net::Ipv6Addr::LOCALHOST, local.port()).into()
        }
        _ => local,
    }
}

/// What `serve --http` says at start when it serves plain HTTP on an address other machines can
/// reach.
pub fn plain_http_warning(addr: SocketAddr) -> String {
    format!(
        "closedloop: WARNING: plain HTTP on {addr}: bearer tokens and every command cross the \
         network unencrypted; give --tls-cert FILE --tls-key FILE, or put a TLS-terminating \
         proxy in front and listen on 127.0.0.1"
    )
}

/// The lines `serve --http` prints once it listens on `local`: the loopback URL first (the
/// bound address itself unless it is 0.0.0.0 or [::]), then this host's `others`.
pub fn announcement(scheme: &str, local: SocketAddr, others: &[IpAddr]) -> String {
    let path = closedloop_mcp::http::PATH;
    let port = local.port();
    if !local.ip().is_unspecified() {
        return format!("closedloop: listening on {scheme}://{local}{path}\n");
    }
    let loopback: IpAddr = match local.ip() {
        IpAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
        IpAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
    };
    let mut out = format!(
        "closedloop: listening on {scheme}://{}{path}\n",
        SocketAddr::new(loopback, port)
    );
    for ip in others {
        out.push_str(&format!(
            "closedloop: also on {scheme}://{}{path}\n",
            SocketAddr::new(*ip, port)
        ));
    }
    out.push_str(&format!(
        "closedloop: {} is every interface of this host: its other addresses answer on port {port} \
         too; under a DNS name, add --allow-host NAME\n",
        match local.ip() {
            IpAddr::V4(ip) => ip.to_string(),
            IpAddr::V6(ip) => format!("[{ip}]"),
        }
    ));
    out
}

/// This host's own addresses of `family`'s IP version, loopback excluded, as the kernel lists
/// them (Linux `/proc/net/fib_trie` and `/proc/net/if_inet6`); elsewhere, the address a UDP
/// socket would send from toward a documentation address (nothing is sent).
pub(super) fn host_addresses(family: IpAddr) -> Vec<IpAddr> {
    let mut found: Vec<IpAddr> = match family {
        IpAddr::V4(_) => std::fs::read_to_string("/proc/net/fib_trie")
            .map(|t| local_v4(&t).into_iter().map(IpAddr::V4).collect())
            .unwrap_or_default(),
        IpAddr::V6(_) => std::fs::read_to_string("/proc/net/if_inet6")
            .map(|t| global_v6(&t).into_iter().map(IpAddr::V6).collect())
            .unwrap_or_default(),
    };
    if found.is_empty() {
        let (bind, probe): (SocketAddr, SocketAddr) = match family {
            IpAddr::V4(_) => ("0.0.0.0:0".parse().unwrap(), "192.0.2.1:9".parse().unwrap()),
            IpAddr::V6(_) => (
                "[::]:0".parse().unwrap(),
                "[2001:db8::1]:9".parse().unwrap(),
            ),
        };
        if let Ok(s) = std::net::UdpSocket::bind(bind)
            && s.connect(probe).is_ok()
            && let Ok(a) = s.local_addr()
            && !a.ip().is_unspecified()
            && !a.ip().is_loopback()
        {
            found.push(a.ip());
        }
    }
    found.sort();
    found.dedup();
    found
}

/// The IPv4 addresses `/proc/net/fib_trie` marks `/32 host LOCAL`, without 127.0.0.0/8.
pub(super) fn local_v4(fib_trie: &str) -> Vec<std::net::Ipv4Addr> {
    let mut out = Vec::new();
    let mut last = None;
    for line in fib_trie.lines() {
        let t = line.trim();
        if let Some(ip) = t.strip_prefix("|-- ") {
            last = ip.parse::<std::net::Ipv4Addr>().ok();
        } else if t == "/32 host LOCAL"
            && let Some(ip) = last
            && !ip.is_loopback()
            && !out.contains(&ip)
        {
            out.push(ip);
        }
    }
    out
}

/// The global-scope IPv6 addresses of `/proc/net/if_inet6` (no loopback, no link-local, which
/// would need a zone in a URL).
pub(super) fn global_v6(if_inet6: &str) -> Vec<std::net::Ipv6Addr> {
    if_inet6
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (hex, scope) = (f.first()?, f.get(3)?);
            if *scope != "00" || hex.len() != 32 {
                return None;
            }
            let n = u128::from_str_radix(hex, 16).ok()?;
            let ip = std::net::Ipv6Addr::from(n);
            (!ip.is_loopback()).then_some(ip)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_v4_reads_the_hosts_own_addresses_from_fib_trie() {
        let t = "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 127.0.0.1\n        /32 host LOCAL\n     |-- 192.168.1.20\n        /24 link UNICAST\n     |-- 192.168.1.23\n        /32 host LOCAL\n     |-- 192.168.1.255\n        /32 link BROADCAST\nLocal:\n     |-- 192.168.1.23\n        /32 host LOCAL\n";
        assert_eq!(
            local_v4(t),
            ["192.168.1.23".parse::<std::net::Ipv4Addr>().unwrap()]
        );
    }

    #[test]
    fn global_v6_skips_loopback_and_link_local() {
        let t = "00000000000000000000000000000001 01 80 10 80       lo\nfd000000000000000000000000000002 04 40 00 82     eth0\nfe8000000000000000fc00fffe000001 04 40 20 80     eth0\n";
        assert_eq!(
            global_v6(t),
            ["fd00::2".parse::<std::net::Ipv6Addr>().unwrap()]
        );
    }

    #[test]
    fn announcement_never_prints_the_unspecified_address_as_a_url() {
        let a = announcement(
            "http",
            "0.0.0.0:41234".parse().unwrap(),
            &["10.0.0.5".parse().unwrap()],
        );
        assert_eq!(
            a,
            "closedloop: listening on http://127.0.0.1:41234/mcp\n\
             closedloop: also on http://10.0.0.5:41234/mcp\n\
             closedloop: 0.0.0.0 is every interface of this host: its other addresses answer on port 41234 too; under a DNS name, add --allow-host NAME\n"
        );
        assert_eq!(
            announcement("https", "127.0.0.1:8080".parse().unwrap(), &[]),
            "closedloop: listening on https://127.0.0.1:8080/mcp\n"
        );
    }
}
