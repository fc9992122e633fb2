//! The Redis credentials and database (`MC_REDIS_*`), as upstream reads them.

/// Credentials and database from the environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedisAuth {
    /// `MC_REDIS_USERNAME` (ACL user; empty: the default user).
    pub username: String,
    /// `MC_REDIS_PASSWORD` (empty: no `AUTH`).
    pub password: String,
    /// `MC_REDIS_DB_INDEX` (0-255).
    pub db: u8,
}

impl RedisAuth {
    /// Reads the `MC_REDIS_*` variables.
    pub fn from_env() -> RedisAuth {
        let var = |n: &str| std::env::var(n).unwrap_or_default();
        let db = match var("MC_REDIS_DB_INDEX").trim() {
            "" => 0,
            v => v.parse().unwrap_or_else(|_| {
                log::warn!("ignoring MC_REDIS_DB_INDEX={v}: not 0-255");
                0
            }),
        };
        RedisAuth {
            username: var("MC_REDIS_USERNAME"),
            password: var("MC_REDIS_PASSWORD"),
            db,
        }
    }
}
