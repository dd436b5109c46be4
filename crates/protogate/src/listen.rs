//! `--listen`: which addresses to bind, and binding them.
//!
//! `IP:PORT` and `[IPv6]:PORT` bind that address; `HOST:PORT` binds every address the name
//! resolves to (`localhost`: 127.0.0.1 and ::1); `:PORT` binds every interface, IPv4 and IPv6
//! on one dual-stack socket (IPv4 alone where the host has no IPv6), as Go's servers do. With
//! port 0 the first address picks a port and the others take the same one.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

use tokio::net::TcpListener;

use crate::config::ConfigError;

/// Where to listen, as written (names are resolved when binding).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// An IP address and port.
    Addr(SocketAddr),
    /// A host name and port.
    Name(String, u16),
    /// Every interface.
    All(u16),
}

impl Listen {
    pub fn parse(text: &str) -> Result<Listen, ConfigError> {
        let bad = |why: &str| {
            ConfigError(format!(
                "--listen {text:?}: {why} (expected HOST:PORT, IP:PORT, [IPv6]:PORT or :PORT)"
            ))
        };
        if let Ok(addr) = text.parse::<SocketAddr>() {
            return Ok(Listen::Addr(addr));
        }
        let (host, port) = text.rsplit_once(':').ok_or_else(|| bad("no port"))?;
        let port: u16 = port
            .parse()
            .map_err(|_| bad(&format!("{port:?} is not a port number")))?;
        if host.is_empty() {
            return Ok(Listen::All(port));
        }
        // An IPv6 address needs its brackets; anything else with a colon, or that is not a
        // host name, is a mistake.
        let name_ok = host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
        if !name_ok || host.len() > 253 {
            return Err(bad(&format!("{host:?} is not an IP address or host name")));
        }
        Ok(Listen::Name(host.to_owned(), port))
    }

    /// The addresses to bind: a name resolved (every address, in the resolver's order, each
    /// once). Resolution failing is a configuration error naming the host.
    fn addrs(&self) -> Result<Vec<SocketAddr>, ConfigError> {
        match self {
            Listen::Addr(addr) => Ok(vec![*addr]),
            Listen::All(port) => Ok(vec![SocketAddr::new(
                IpAddr::V6(Ipv6Addr::UNSPECIFIED),
                *port,
            )]),
            Listen::Name(host, port) => {
                let mut addrs: Vec<SocketAddr> = (host.as_str(), *port)
                    .to_socket_addrs()
                    .map_err(|e| ConfigError(format!("--listen {host}:{port}: {e}")))?
                    .collect();
                let mut seen = Vec::new();
                addrs.retain(|a| {
                    let new = !seen.contains(a);
                    seen.push(*a);
                    new
                });
                if addrs.is_empty() {
                    return Err(ConfigError(format!(
                        "--listen {host}:{port}: the name has no address"
                    )));
                }
                Ok(addrs)
            }
        }
    }

    /// Binds every address. An address of a family this host lacks (a name that resolves to
    /// ::1 where IPv6 is off) is skipped with a warning while another is bound; any other
    /// failure (in use, not permitted) fails.
    pub fn bind(&self) -> anyhow::Result<Vec<TcpListener>> {
        let addrs = self.addrs()?;
        // With port 0 the first address's port (the kernel's pick) may be taken at another
        // address: then the kernel is asked again.
        let mut attempts = if addrs.len() > 1 && addrs[0].port() == 0 {
            8
        } else {
            1
        };
        loop {
            attempts -= 1;
            match self.bind_each(&addrs) {
                Err(Bind::PickedPortTaken(e)) if attempts > 0 => {
                    tracing::debug!(error = %e, "the picked port is taken at another address: picking again");
                }
                Err(Bind::PickedPortTaken(e) | Bind::Failed(e)) => return Err(e),
                Ok(listeners) => return Ok(listeners),
            }
        }
    }

    fn bind_each(&self, addrs: &[SocketAddr]) -> Result<Vec<TcpListener>, Bind> {
        let mut listeners: Vec<TcpListener> = Vec::new();
        let mut picked = None;
        for &addr in addrs {
            let mut addr = addr;
            if let Some(port) = picked {
                addr.set_port(port);
            }
            let bound = match self {
                Listen::All(_) => bind_all_interfaces(addr.port()),
                _ => bind(addr),
            };
            match bound {
                Ok(listener) => {
                    let port = listener
                        .local_addr()
                        .map_err(|e| Bind::Failed(e.into()))?
                        .port();
                    if addr.port() == 0 {
                        picked = Some(port);
                    }
                    listeners.push(listener);
                }
                Err(e) if family_unavailable(&e) && matches!(self, Listen::Name(..)) => {
                    tracing::warn!(%addr, error = %e, "not listening on an address this host cannot use");
                }
                Err(e) if e.kind() == io::ErrorKind::AddrInUse && picked.is_some() => {
                    return Err(Bind::PickedPortTaken(anyhow::anyhow!(
                        "binding {addr}: {e}"
                    )));
                }
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                    return Err(Bind::Failed(anyhow::anyhow!(
                        "binding {addr}: {e} (is another gateway or demo running? choose another --listen)"
                    )));
                }
                Err(e) => return Err(Bind::Failed(anyhow::anyhow!("binding {addr}: {e}"))),
            }
        }
        if listeners.is_empty() {
            return Err(Bind::Failed(anyhow::anyhow!(
                "--listen {self}: no address could be bound"
            )));
        }
        Ok(listeners)
    }
}

/// Why binding failed.
enum Bind {
    /// The port the kernel picked for the first address is taken at a later one.
    PickedPortTaken(anyhow::Error),
    Failed(anyhow::Error),
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Addr(addr) => write!(f, "{addr}"),
            Listen::Name(host, port) => write!(f, "{host}:{port}"),
            Listen::All(port) => write!(f, ":{port}"),
        }
    }
}

/// EAFNOSUPPORT, which std has no error kind for (Linux's number; the BSDs' and macOS's is 47).
const EAFNOSUPPORT: i32 = if cfg!(target_os = "linux") { 97 } else { 47 };

/// The host cannot use this address family (no IPv6), or this address.
fn family_unavailable(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::AddrNotAvailable || e.raw_os_error() == Some(EAFNOSUPPORT)
}

/// A listening socket as tokio's `TcpListener::bind` makes it (SO_REUSEADDR on Unix, backlog
/// 1024), non-blocking.
fn listen_on(socket: socket2::Socket, addr: SocketAddr) -> io::Result<TcpListener> {
    #[cfg(unix)]
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    socket.set_nonblocking(true)?;
    TcpListener::from_std(socket.into())
}

fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    listen_on(socket, addr)
}

/// `[::]:port` accepting IPv4 too (IPV6_V6ONLY off, whatever the system default); `0.0.0.0`
/// where the host has no IPv6.
fn bind_all_interfaces(port: u16) -> io::Result<TcpListener> {
    let v6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port);
    let dual = socket2::Socket::new(
        socket2::Domain::IPV6,
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )
    .and_then(|s| s.set_only_v6(false).map(|()| s));
    match dual {
        Ok(socket) => match listen_on(socket, v6) {
            Err(e) if family_unavailable(&e) => {
                bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port))
            }
            other => other,
        },
        Err(e) if family_unavailable(&e) => {
            bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port))
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses_parse() {
        let ok = [
            (
                "127.0.0.1:8080",
                Listen::Addr("127.0.0.1:8080".parse().unwrap()),
            ),
            ("[::1]:8080", Listen::Addr("[::1]:8080".parse().unwrap())),
            ("0.0.0.0:0", Listen::Addr("0.0.0.0:0".parse().unwrap())),
            ("localhost:8080", Listen::Name("localhost".into(), 8080)),
            (
                "gw-1.internal.example:443",
                Listen::Name("gw-1.internal.example".into(), 443),
            ),
            (":8080", Listen::All(8080)),
        ];
        for (text, want) in ok {
            assert_eq!(Listen::parse(text).unwrap(), want, "{text}");
            assert_eq!(Listen::parse(text).unwrap().to_string(), text);
        }
        for bad in [
            "",
            "8080",
            "localhost",
            "localhost:",
            "localhost:http",
            "localhost:65536",
            "::1:8080",
            "[::1]",
            "bad_host:80",
            "-x:80",
            "a..b:80",
            "http://localhost:80",
        ] {
            let e = Listen::parse(bad).unwrap_err();
            assert!(e.0.starts_with(&format!("--listen {bad:?}")), "{bad}: {e}");
        }
    }

    #[tokio::test]
    async fn a_name_binds_every_address_it_resolves_to_on_one_port() {
        let listen = Listen::parse("localhost:0").unwrap();
        let expected = listen.addrs().unwrap();
        let listeners = listen.bind().unwrap();
        let bound: Vec<SocketAddr> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
        assert!(!bound.is_empty());
        assert!(bound.len() <= expected.len(), "{bound:?} / {expected:?}");
        let port = bound[0].port();
        assert_ne!(port, 0);
        for (b, e) in bound.iter().zip(&expected) {
            assert_eq!((b.ip(), b.port()), (e.ip(), port), "{bound:?}");
        }
        // Each is really listening.
        for b in &bound {
            tokio::net::TcpStream::connect(b).await.expect("connects");
        }
    }

    #[tokio::test]
    async fn all_interfaces_take_ipv4_connections() {
        let listeners = Listen::parse(":0").unwrap().bind().unwrap();
        assert_eq!(listeners.len(), 1);
        let port = listeners[0].local_addr().unwrap().port();
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("IPv4 connects to the all-interfaces socket");
    }

    #[test]
    fn unresolvable_names_are_configuration_errors() {
        let e = Listen::parse("no-such-host.invalid:80")
            .unwrap()
            .addrs()
            .unwrap_err();
        assert!(e.0.contains("no-such-host.invalid:80"), "{e}");
    }
}
