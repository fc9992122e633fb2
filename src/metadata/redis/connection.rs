//! One connection to a Redis server: the address parsed from `redis://host[:port]`,
//! connected on first use with `AUTH` and `SELECT` as [`RedisAuth`] asks, and each
//! command run once more on a fresh connection when the first try lost it.

use std::io::BufReader;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use parking_lot::Mutex;

use super::auth::RedisAuth;
use super::resp::{command, expect_ok, Reply};
use crate::error::{Error, Result};

/// Per-operation socket timeout (as etcd's).
const OP_TIMEOUT: Duration = Duration::from_secs(5);
/// Upstream's port when the connection string has none (the handshake port default).
const DEFAULT_PORT: u16 = 12001;

/// A Redis server's address and the one connection to it, shared by every command.
pub(super) struct Connection {
    address: String,
    auth: RedisAuth,
    conn: Mutex<Option<BufReader<TcpStream>>>,
}

impl Connection {
    /// The server of `redis://host[:port]` (port 12001 when missing, as upstream); it
    /// connects on first use.
    pub(super) fn new(conn: &str, auth: RedisAuth) -> Result<Connection> {
        let rest = conn.trim().strip_prefix("redis://").unwrap_or(conn.trim());
        let rest = rest.trim_end_matches('/');
        if rest.is_empty() || rest.contains('/') || rest.contains('@') {
            return Err(Error::InvalidArgument(format!(
                "malformed Redis address '{conn}' (redis://host:port; credentials come from \
                 MC_REDIS_USERNAME / MC_REDIS_PASSWORD)"
            )));
        }
        let (host, port) = crate::host::addr::parse_host_port(rest, DEFAULT_PORT);
        Ok(Connection {
            address: crate::host::addr::join_host_port(&host, port),
            auth,
            conn: Mutex::new(None),
        })
    }

    /// The server's `host:port`.
    pub(super) fn address(&self) -> &str {
        &self.address
    }

    /// A new connection to the server, authenticated and on its database.
    fn connect(&self) -> Result<BufReader<TcpStream>> {
        let addrs: Vec<_> = self
            .address
            .to_socket_addrs()
            .map_err(|e| Error::Dns(format!("redis {}: {e}", self.address)))?
            .collect();
        let mut last = None;
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, OP_TIMEOUT) {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    s.set_read_timeout(Some(OP_TIMEOUT))
                        .and_then(|()| s.set_write_timeout(Some(OP_TIMEOUT)))
                        .map_err(|e| Error::socket("redis socket timeouts", e))?;
                    let mut conn = BufReader::new(s);
                    self.handshake(&mut conn)?;
                    return Ok(conn);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(Error::Metadata(format!(
            "cannot connect to redis {}: {}",
            self.address,
            last.map_or_else(|| "no address".into(), |e| e.to_string())
        )))
    }

    /// `AUTH` and `SELECT` on a new connection, as [`RedisAuth`] asks.
    fn handshake(&self, conn: &mut BufReader<TcpStream>) -> Result<()> {
        let a = &self.auth;
        if !a.password.is_empty() {
            let reply = if a.username.is_empty() {
                command(conn, &[b"AUTH", a.password.as_bytes()])?
            } else {
                command(
                    conn,
                    &[b"AUTH", a.username.as_bytes(), a.password.as_bytes()],
                )?
            };
            expect_ok(reply, "AUTH")?;
        }
        if a.db != 0 {
            expect_ok(
                command(conn, &[b"SELECT", a.db.to_string().as_bytes()])?,
                "SELECT",
            )?;
        }
        Ok(())
    }

    /// Runs one command, reconnecting once when the connection is gone.
    pub(super) fn run(&self, args: &[&[u8]]) -> Result<Reply> {
        let mut slot = self.conn.lock();
        for attempt in 0..2 {
            if slot.is_none() {
                *slot = Some(self.connect()?);
            }
            let conn = slot.as_mut().expect("connected above");
            match command(conn, args) {
                Ok(Reply::Error(e)) => return Err(Error::Metadata(format!("redis: {e}"))),
                Ok(reply) => return Ok(reply),
                Err(e) => {
                    *slot = None;
                    if attempt == 1 {
                        return Err(e);
                    }
                }
            }
        }
        unreachable!("the loop returns on its second attempt")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        let a = RedisAuth::default();
        assert_eq!(
            Connection::new("redis://h:6379", a.clone())
                .unwrap()
                .address,
            "h:6379"
        );
        assert_eq!(
            Connection::new("redis://h", a.clone()).unwrap().address,
            "h:12001"
        );
        assert!(Connection::new("redis://user:pw@h:1", a.clone()).is_err());
        assert!(Connection::new("redis://", a).is_err());
    }
}
