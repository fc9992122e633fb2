//! The RPCs a client with an SSD tier serves to readers of its LOCAL_DISK replicas
//! (spec tiers-events-conductor.md §1.5): `batch_get_offload_object` stages objects
//! from its disk in registered memory and says where, the reader pulls them with a
//! Transfer Engine read, then `release_offload_buffer` frees the staging space (or the
//! owner does after `gc_ttl_ms`). coro_rpc framing as the master's, function ids from
//! `mooncake::RealClient::<name>`; the address is the replica's `transport_endpoint`.

use super::coro_rpc;
use super::master_api::{ErrorCode, MasterResult};
use super::struct_pack;
use std::io::Write;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Qualified-name prefix of the owner's handlers.
const PREFIX: &str = "mooncake::RealClient::";

/// Largest reply accepted from an owner.
const MAX_REPLY: usize = 64 << 20;

/// The owner-side methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffloadMethod {
    /// `batch_get_offload_object(vector<string> keys, vector<i64> sizes)
    ///   -> expected<BatchGetOffloadObjectResponse, ErrorCode>`.
    BatchGetOffloadObject,
    /// `release_offload_buffer(u64 batch_id) -> bool`.
    ReleaseOffloadBuffer,
}

impl OffloadMethod {
    /// Both methods.
    pub const ALL: [OffloadMethod; 2] = [
        OffloadMethod::BatchGetOffloadObject,
        OffloadMethod::ReleaseOffloadBuffer,
    ];

    /// Upstream's method name.
    pub fn name(self) -> &'static str {
        match self {
            OffloadMethod::BatchGetOffloadObject => "batch_get_offload_object",
            OffloadMethod::ReleaseOffloadBuffer => "release_offload_buffer",
        }
    }

    /// The coro_rpc function id.
    pub fn id(self) -> u32 {
        coro_rpc::function_id_of(&format!("{PREFIX}{}", self.name()))
    }

    /// The method with this function id.
    pub fn from_id(id: u32) -> Option<OffloadMethod> {
        OffloadMethod::ALL.into_iter().find(|m| m.id() == id)
    }
}

/// Where an owner staged a batch of objects (struct_pack in `codec`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchGetOffloadObjectResponse {
    /// The staging batch, for `release_offload_buffer`.
    pub batch_id: u64,
    /// Address of each object, in request order.
    pub pointers: Vec<u64>,
    /// The owner's Transfer Engine segment name, to read them from.
    pub transfer_engine_addr: String,
    /// How long the owner keeps the batch staged unless released.
    pub gc_ttl_ms: u64,
}

/// Arguments of `batch_get_offload_object`.
pub type BatchGetArgs = (Vec<String>, Vec<i64>);

/// Reply of `batch_get_offload_object`.
pub type BatchGetReply = Result<BatchGetOffloadObjectResponse, ErrorCode>;

/// One call to an owner at `endpoint` (`host:port`): connects, sends, reads the reply.
fn call(endpoint: &str, m: OffloadMethod, body: &[u8], timeout: Duration) -> MasterResult<Vec<u8>> {
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        log::warn!("offload rpc {} to {endpoint}: {what}: {e}", m.name());
        ErrorCode::RPC_FAIL
    };
    let addr = endpoint
        .to_socket_addrs()
        .map_err(|e| fail("address", &e))?
        .next()
        .ok_or_else(|| fail("address", &"no address"))?;
    let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| fail("connect", &e))?;
    let _ = s.set_nodelay(true);
    s.set_read_timeout(Some(timeout))
        .and_then(|()| s.set_write_timeout(Some(timeout)))
        .map_err(|e| fail("socket", &e))?;
    s.write_all(&coro_rpc::encode_request(1, m.id(), body))
        .map_err(|e| fail("send", &e))?;
    let (h, reply) = coro_rpc::read_response(&mut s, MAX_REPLY)
        .map_err(|e| fail("receive", &e))?
        .ok_or_else(|| fail("receive", &"connection closed"))?;
    match h.err_code {
        coro_rpc::ERR_OK => Ok(reply),
        coro_rpc::ERR_FUNCTION_NOT_REGISTERED => Err(ErrorCode::NOT_SUPPORTED),
        code => Err(fail(
            &format!("err_code {code}"),
            &coro_rpc::error_message(&reply),
        )),
    }
}

/// The key an owner stores an object under: `tenant`, a NUL, the key.
pub fn storage_key(tenant: &str, key: &str) -> String {
    format!("{tenant}\0{key}")
}

/// `batch_get_offload_object` on the owner at `endpoint`: stages `keys` (storage keys,
/// see [`storage_key`], of `sizes` bytes each) and says where.
pub fn batch_get_offload_object(
    endpoint: &str,
    keys: &[String],
    sizes: &[i64],
    timeout: Duration,
) -> MasterResult<BatchGetOffloadObjectResponse> {
    let body = struct_pack::serialize(&(keys.to_vec(), sizes.to_vec()));
    let reply = call(
        endpoint,
        OffloadMethod::BatchGetOffloadObject,
        &body,
        timeout,
    )?;
    let staged = struct_pack::deserialize::<BatchGetReply>(&reply).map_err(|e| {
        log::warn!("offload rpc batch_get_offload_object from {endpoint}: reply: {e}");
        ErrorCode::RPC_FAIL
    })??;
    if staged.pointers.len() != keys.len() {
        log::warn!(
            "offload rpc batch_get_offload_object from {endpoint}: {} pointers for {} keys",
            staged.pointers.len(),
            keys.len()
        );
        return Err(ErrorCode::RPC_FAIL);
    }
    Ok(staged)
}

/// `release_offload_buffer` on the owner at `endpoint`: whether it knew the batch.
pub fn release_offload_buffer(
    endpoint: &str,
    batch_id: u64,
    timeout: Duration,
) -> MasterResult<bool> {
    let body = struct_pack::serialize(&(batch_id,));
    let reply = call(
        endpoint,
        OffloadMethod::ReleaseOffloadBuffer,
        &body,
        timeout,
    )?;
    struct_pack::deserialize::<bool>(&reply).map_err(|e| {
        log::warn!("offload rpc release_offload_buffer from {endpoint}: reply: {e}");
        ErrorCode::RPC_FAIL
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::struct_pack::literal;

    #[test]
    fn ids_and_literals() {
        for m in OffloadMethod::ALL {
            assert_eq!(OffloadMethod::from_id(m.id()), Some(m));
        }
        assert_ne!(
            OffloadMethod::BatchGetOffloadObject.id(),
            OffloadMethod::ReleaseOffloadBuffer.id()
        );
        assert_eq!(
            literal::<BatchGetReply>(),
            vec![0x87, 0xfd, 0x04, 0x84, 0x04, 0x80, 0x0c, 0x04, 0xff, 0x01]
        );
        let r: BatchGetReply = Ok(BatchGetOffloadObjectResponse {
            batch_id: 9,
            pointers: vec![1, 2],
            transfer_engine_addr: "127.0.0.1:1".into(),
            gc_ttl_ms: 5000,
        });
        let bytes = struct_pack::serialize(&r);
        assert_eq!(struct_pack::deserialize::<BatchGetReply>(&bytes), Ok(r));
    }
}
