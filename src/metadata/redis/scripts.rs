//! The Lua scripts the Redis store runs with `EVAL`, each one atomic: the owner's lease
//! (create with a TTL, renew, delete while it is still held) and the versioned
//! operations over a value and the version key beside it.

/// Sets `KEYS[1] = ARGV[1]` (if absent) and `KEYS[2] = ARGV[2]`, both expiring in
/// `ARGV[3]` ms, and bumps the counter `KEYS[3]`; its new value, or 0 when `KEYS[1]`
/// existed.
pub(super) const CREATE_WITH_TTL: &str =
    "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[3]) then \
     redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3]) \
     return redis.call('INCR', KEYS[3]) else return 0 end";
/// Extends `KEYS[1]` and `KEYS[2]` to `ARGV[2]` ms if `KEYS[1]` holds `ARGV[1]`; 1 if
/// it did.
pub(super) const RENEW_IF_OWNER: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
     redis.call('PEXPIRE', KEYS[1], ARGV[2]) redis.call('PEXPIRE', KEYS[2], ARGV[2]) \
     return 1 else return 0 end";
/// Deletes `KEYS[1]` and `KEYS[2]` if `KEYS[1]` holds `ARGV[1]`.
pub(super) const DELETE_IF_OWNER: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
     return redis.call('DEL', KEYS[1], KEYS[2]) else return 0 end";

/// What follows a key in the name of the key that holds its version.
pub(super) const VERSION_SUFFIX: &str = "\0version";
/// The counter that numbers every versioned write.
pub(super) const VERSION_COUNTER: &str = "\0mooncake\0versions";

/// The script prelude: `current()`, the version of the string `KEYS[1]` (from
/// `KEYS[2]`, `'0'` when none), `nil` when it is absent or no string.
pub(super) const CURRENT: &str = "local function current() \
     if redis.call('TYPE', KEYS[1]).ok ~= 'string' then return nil end \
     return redis.call('GET', KEYS[2]) or '0' end ";
/// The script epilogue: `write()`, which writes `KEYS[1] = ARGV[1]` with the next
/// number of the counter `KEYS[3]` as its version in `KEYS[2]`.
pub(super) const WRITE: &str = "local function write() redis.call('INCR', KEYS[3]) \
     redis.call('SET', KEYS[1], ARGV[1]) \
     redis.call('SET', KEYS[2], redis.call('GET', KEYS[3])) return 1 end ";
/// `{value, version}` of `KEYS[1]`, nil when absent (or no string).
pub(super) const GET_VERSIONED: &str = "local v = current() if not v then return false end \
     return {redis.call('GET', KEYS[1]), v}";
/// Writes `KEYS[1] = ARGV[1]` if `KEYS[1]` does not exist: 1, or 0.
pub(super) const CREATE: &str =
    "if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end return write()";
/// Writes `KEYS[1] = ARGV[1]`: 1.
pub(super) const PUT: &str = "return write()";
/// Writes `KEYS[1] = ARGV[1]` if its version is `ARGV[2]`: 1, or 0.
pub(super) const SWAP: &str = "if current() ~= ARGV[2] then return 0 end return write()";
/// Deletes `KEYS[1]` and its version if its version is `ARGV[1]`: 1, or 0.
pub(super) const DELETE_IF: &str = "if current() ~= ARGV[1] then return 0 end \
     redis.call('DEL', KEYS[1], KEYS[2]) return 1";
