//! The HTTP server's limits: sizes, connection counts and timeouts.

use std::time::Duration;

/// Largest request body accepted; bigger ones get 413.
pub const MAX_BODY_BYTES: usize = 64 << 20;
/// Largest request head (request line plus headers) accepted; bigger ones get 431.
pub const MAX_HEAD_BYTES: usize = 64 << 10;
/// Most connections served at once; further ones get 503 and are closed.
pub const MAX_CONNECTIONS: usize = 512;
/// Most connections one host may hold at once; further ones get 503 and are closed.
pub const MAX_CONNECTIONS_PER_PEER: usize = 128;
/// The name of the thread that serves each connection.
pub const CONNECTION_THREAD: &str = "mc-http";
/// Most header lines in one request.
pub(super) const MAX_HEADERS: usize = 128;
/// How long an idle keep-alive connection is kept open.
pub(super) const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one request may take to arrive once its first byte was seen.
pub(super) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Write timeout for responses.
pub(super) const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// The socket's read timeout: a blocked read wakes this often to check its deadline.
/// Set once per connection (not per read, which would cost a system call each), so a
/// deadline is kept to within one tick.
pub(super) const READ_TICK: Duration = Duration::from_secs(1);
