//! The server side of the master's coro_rpc protocol: decode a request body, call a
//! [`MasterApi`], encode the reply ([`handle_request`]); and a blocking per-connection
//! loop ([`serve_stream`]) the master runs on one thread per client connection.
//!
//! Transport-level failures follow upstream: an unknown function id is `err_code` 11
//! and an undecodable argument tuple `err_code` 4, each with a struct_pack string
//! message. Batch methods return one result per input, so a whole-call failure of the
//! service is repeated for every input; `RemoveAll` returns a bare `long`, so its
//! failure is the (negative) error code itself.

use super::codec::{self, rpc, Rpc};
use super::coro_rpc::{self, Method};
use super::disk_tier_api::DiskTierApi;
use super::master_api::{MasterApi, MasterResult};
use super::struct_pack::{self, Map};
use std::io::{self, BufReader, BufWriter, Write};
use std::net::{Shutdown, TcpStream};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Handles one request: returns the response `err_code` and body. Never panics (a
/// panicking service is reported as `err_code` 10, "rpc throw exception").
pub fn handle_request(api: &dyn MasterApi, function_id: u32, body: &[u8]) -> (u8, Vec<u8>) {
    let Some(method) = Method::from_id(function_id) else {
        log::debug!("master rpc: unknown function id {function_id:#010x}");
        return (
            coro_rpc::ERR_FUNCTION_NOT_REGISTERED,
            coro_rpc::error_body(coro_rpc::MSG_FUNCTION_NOT_REGISTERED),
        );
    };
    match catch_unwind(AssertUnwindSafe(|| dispatch(api, method, body))) {
        Ok(r) => r,
        Err(_) => {
            log::error!("master rpc: {} panicked", method.name());
            (
                coro_rpc::ERR_THROW_EXCEPTION,
                coro_rpc::error_body("rpc throw exception"),
            )
        }
    }
}

/// Decodes `R`'s arguments, calls `f`, encodes its result.
fn call<R: Rpc>(body: &[u8], f: impl FnOnce(R::Args) -> R::Ret) -> (u8, Vec<u8>) {
    match codec::decode_args::<R::Args>(body) {
        Ok(args) => (coro_rpc::ERR_OK, struct_pack::serialize(&f(args))),
        Err(e) => {
            log::debug!("master rpc: {}: {e}", R::METHOD.name());
            (
                coro_rpc::ERR_INVALID_ARGUMENTS,
                coro_rpc::error_body(coro_rpc::MSG_INVALID_ARGUMENTS),
            )
        }
    }
}

/// [`call`] for a disk-tier method: "function not registered" from a master without
/// a disk tier.
fn tier_call<R: Rpc>(
    api: &dyn MasterApi,
    body: &[u8],
    f: impl FnOnce(&dyn DiskTierApi, R::Args) -> R::Ret,
) -> (u8, Vec<u8>) {
    match api.disk_tier() {
        Some(tier) => call::<R>(body, |args| f(tier, args)),
        None => not_registered(R::METHOD),
    }
}

fn not_registered(m: Method) -> (u8, Vec<u8>) {
    log::debug!("master rpc: {} is not served here", m.name());
    (
        coro_rpc::ERR_FUNCTION_NOT_REGISTERED,
        coro_rpc::error_body(coro_rpc::MSG_FUNCTION_NOT_REGISTERED),
    )
}

/// A batch result; a failure of the whole call becomes one error per input.
fn per_input<T>(n: usize, r: MasterResult<Vec<MasterResult<T>>>) -> Vec<MasterResult<T>> {
    r.unwrap_or_else(|e| (0..n).map(|_| Err(e)).collect())
}

fn dispatch(api: &dyn MasterApi, m: Method, b: &[u8]) -> (u8, Vec<u8>) {
    match m {
        Method::ServiceReady => call::<rpc::ServiceReady>(b, |()| api.service_ready()),
        Method::GetStorageConfig => call::<rpc::GetStorageConfig>(b, |()| api.get_storage_config()),
        Method::GetFsdir => call::<rpc::GetFsdir>(b, |()| api.get_fsdir()),
        Method::MountSegment => call::<rpc::MountSegment>(b, |(s, c)| api.mount_segment(&s, c)),
        Method::ReMountSegment => {
            call::<rpc::ReMountSegment>(b, |(s, c)| api.remount_segment(&s, c))
        }
        Method::UnmountSegment => {
            call::<rpc::UnmountSegment>(b, |(s, c)| api.unmount_segment(s, c))
        }
        Method::GracefulUnmountSegment => call::<rpc::GracefulUnmountSegment>(b, |(s, c, g)| {
            api.graceful_unmount_segment(s, c, g)
        }),
        Method::Ping => call::<rpc::Ping>(b, |(c,)| api.ping(c)),
        Method::FetchTasks => call::<rpc::FetchTasks>(b, |(c, n)| api.fetch_tasks(c, n)),
        Method::ExistKey => call::<rpc::ExistKey>(b, |(k, t)| api.exist_key(&k, &t)),
        Method::BatchExistKey => {
            call::<rpc::BatchExistKey>(b, |(k, t)| per_input(k.len(), api.batch_exist_key(&k, &t)))
        }
        Method::GetReplicaList => {
            call::<rpc::GetReplicaList>(b, |(k, t)| api.get_replica_list(&k, &t))
        }
        Method::BatchGetReplicaList => call::<rpc::BatchGetReplicaList>(b, |(k, t)| {
            per_input(k.len(), api.batch_get_replica_list(&k, &t))
        }),
        Method::BatchBeginRead => call::<rpc::BatchBeginRead>(b, |(k, t)| {
            per_input(k.len(), api.batch_begin_read(&k, &t))
        }),
        Method::BatchEndRead => {
            call::<rpc::BatchEndRead>(b, |(k, ids, t)| api.batch_end_read(&k, &ids, &t))
        }
        Method::GetReplicaListByRegex => call::<rpc::GetReplicaListByRegex>(b, |(r, t)| {
            api.get_replica_list_by_regex(&r, &t).map(Map)
        }),
        Method::PutStart => {
            call::<rpc::PutStart>(b, |(c, k, n, cfg, t)| api.put_start(c, &k, n, &cfg, &t))
        }
        Method::PutEnd => call::<rpc::PutEnd>(b, |(c, m, r, t)| api.put_end(c, &m, r, &t)),
        Method::PutRevoke => call::<rpc::PutRevoke>(b, |(c, k, r, t)| api.put_revoke(c, &k, r, &t)),
        Method::BatchPutStart => call::<rpc::BatchPutStart>(b, |(c, k, n, cfg, t)| {
            per_input(k.len(), api.batch_put_start(c, &k, &n, &cfg, &t))
        }),
        Method::BatchPutEnd => call::<rpc::BatchPutEnd>(b, |(c, m, r, t)| {
            per_input(m.len(), api.batch_put_end(c, &m, r, &t))
        }),
        Method::BatchPutRevoke => call::<rpc::BatchPutRevoke>(b, |(c, k, r, t)| {
            per_input(k.len(), api.batch_put_revoke(c, &k, r, &t))
        }),
        Method::UpsertStart => {
            call::<rpc::UpsertStart>(b, |(c, k, n, cfg, t)| api.upsert_start(c, &k, n, &cfg, &t))
        }
        Method::UpsertEnd => call::<rpc::UpsertEnd>(b, |(c, m, r, t)| api.upsert_end(c, &m, r, &t)),
        Method::UpsertRevoke => {
            call::<rpc::UpsertRevoke>(b, |(c, k, r, t)| api.upsert_revoke(c, &k, r, &t))
        }
        Method::BatchUpsertStart => call::<rpc::BatchUpsertStart>(b, |(c, k, n, cfg, t)| {
            per_input(k.len(), api.batch_upsert_start(c, &k, &n, &cfg, &t))
        }),
        Method::BatchUpsertEnd => call::<rpc::BatchUpsertEnd>(b, |(c, m, t)| {
            per_input(m.len(), api.batch_upsert_end(c, &m, &t))
        }),
        Method::BatchUpsertRevoke => call::<rpc::BatchUpsertRevoke>(b, |(c, k, t)| {
            per_input(k.len(), api.batch_upsert_revoke(c, &k, &t))
        }),
        Method::Remove => call::<rpc::Remove>(b, |(k, f, t)| api.remove(&k, f, &t)),
        Method::RemoveByRegex => {
            call::<rpc::RemoveByRegex>(b, |(r, f, t)| api.remove_by_regex(&r, f, &t))
        }
        Method::RemoveAll => call::<rpc::RemoveAll>(b, |(f, t)| {
            api.remove_all(f, &t).unwrap_or_else(|e| i64::from(e.0))
        }),
        Method::BatchRemove => call::<rpc::BatchRemove>(b, |(k, f, t)| {
            per_input(k.len(), api.batch_remove(&k, f, &t))
        }),
        Method::BatchQueryIp => {
            call::<rpc::BatchQueryIp>(b, |(c,)| api.batch_query_ip(&c).map(Map))
        }
        Method::BatchReplicaClear => {
            call::<rpc::BatchReplicaClear>(b, |(k, c, s)| api.batch_replica_clear(&k, c, &s))
        }
        _ => dispatch_disk_tier(api, m, b),
    }
}

fn dispatch_disk_tier(api: &dyn MasterApi, m: Method, b: &[u8]) -> (u8, Vec<u8>) {
    match m {
        Method::MountLocalDiskSegment => {
            tier_call::<rpc::MountLocalDiskSegment>(api, b, |t, (c, e)| {
                t.mount_local_disk_segment(c, e)
            })
        }
        Method::UnmountLocalDiskSegment => {
            tier_call::<rpc::UnmountLocalDiskSegment>(api, b, |t, (c,)| {
                t.unmount_local_disk_segment(c)
            })
        }
        Method::OffloadObjectHeartbeat => {
            tier_call::<rpc::OffloadObjectHeartbeat>(api, b, |t, (c, e)| {
                t.offload_object_heartbeat(c, e)
            })
        }
        Method::PollRemoveAll => {
            tier_call::<rpc::PollRemoveAll>(api, b, |t, (c,)| t.poll_remove_all(c))
        }
        Method::ReportSsdCapacity => {
            tier_call::<rpc::ReportSsdCapacity>(api, b, |t, (c, n)| t.report_ssd_capacity(c, n))
        }
        Method::NotifyOffloadSuccess => {
            tier_call::<rpc::NotifyOffloadSuccess>(api, b, |t, (c, tasks, metas)| {
                t.notify_offload_success(c, &tasks, &metas)
            })
        }
        Method::PromotionObjectHeartbeat => {
            tier_call::<rpc::PromotionObjectHeartbeat>(api, b, |t, (c,)| {
                t.promotion_object_heartbeat(c)
            })
        }
        Method::PromotionAllocStart => {
            tier_call::<rpc::PromotionAllocStart>(api, b, |t, (c, k, tn, n, pref)| {
                t.promotion_alloc_start(c, &k, &tn, n, &pref)
            })
        }
        Method::NotifyPromotionSuccess => {
            tier_call::<rpc::NotifyPromotionSuccess>(api, b, |t, (c, k, tn)| {
                t.notify_promotion_success(c, &k, &tn)
            })
        }
        Method::NotifyPromotionFailure => {
            tier_call::<rpc::NotifyPromotionFailure>(api, b, |t, (c, k, tn)| {
                t.notify_promotion_failure(c, &k, &tn)
            })
        }
        Method::EvictDiskReplica => {
            tier_call::<rpc::EvictDiskReplica>(api, b, |t, (c, k, tn, r)| {
                t.evict_disk_replica(c, &k, &tn, r)
            })
        }
        Method::BatchEvictDiskReplica => {
            tier_call::<rpc::BatchEvictDiskReplica>(api, b, |t, (c, k, tn, r)| {
                per_input(k.len(), t.batch_evict_disk_replica(c, &k, &tn, r))
            })
        }
        _ => not_registered(m),
    }
}

/// Whether `buf` starts with a complete request frame.
fn whole_request_buffered(buf: &[u8]) -> bool {
    let Some(head) = buf.get(..coro_rpc::REQ_HEADER_LEN) else {
        return false;
    };
    let len = |i: usize| {
        u64::from(u32::from_le_bytes([
            head[i],
            head[i + 1],
            head[i + 2],
            head[i + 3],
        ]))
    };
    (buf.len() as u64) >= coro_rpc::REQ_HEADER_LEN as u64 + len(12) + len(16)
}

/// Serves one client connection until it closes: reads request frames, handles them
/// in order, writes the responses (pipelined requests simply queue). A bad header or a
/// body or attachment over `max_body` ends this connection with an `InvalidData`
/// error; a clean close by the peer is `Ok(())`. The socket is shut down on return.
pub fn serve_stream(stream: TcpStream, api: &dyn MasterApi, max_body: usize) -> io::Result<()> {
    serve_stream_observed(stream, api, max_body, &mut |_, _| {})
}

/// [`serve_stream`], calling `observe` with the function id and body of every request
/// before it is handled (the master learns from it which clients a connection carries).
pub fn serve_stream_observed(
    stream: TcpStream,
    api: &dyn MasterApi,
    max_body: usize,
    observe: &mut dyn FnMut(u32, &[u8]),
) -> io::Result<()> {
    let _ = stream.set_nodelay(true);
    let control = stream.try_clone()?;
    let r = serve_loop(stream, api, max_body, observe);
    // Close even if the caller keeps clones of this socket.
    let _ = control.shutdown(Shutdown::Both);
    r
}

fn serve_loop(
    stream: TcpStream,
    api: &dyn MasterApi,
    max_body: usize,
    observe: &mut dyn FnMut(u32, &[u8]),
) -> io::Result<()> {
    let mut reader = BufReader::with_capacity(64 << 10, stream.try_clone()?);
    let mut writer = BufWriter::with_capacity(64 << 10, stream);
    while let Some((h, body)) = coro_rpc::read_request(&mut reader, max_body)? {
        observe(h.function_id, &body);
        let (mut err, mut resp) = if api.serving() {
            handle_request(api, h.function_id, &body)
        } else {
            (
                coro_rpc::ERR_OPERATION_CANCELED,
                coro_rpc::error_body(MSG_NOT_SERVING),
            )
        };
        if u32::try_from(resp.len()).is_err() {
            err = 14; // message_too_large
            resp = coro_rpc::error_body("body larger than 4G");
        }
        let reply = coro_rpc::encode_response(h.seq, err, &resp);
        // No reply leaves before the API allows it (`before_reply`): not through a
        // full buffer either.
        if writer.buffer().len() + reply.len() > writer.capacity() {
            release_replies(api, &mut writer)?;
        }
        writer.write_all(&reply)?;
        // Coalesce replies while another whole request is already buffered; flush
        // before anything could block on the socket.
        if !whole_request_buffered(reader.buffer()) {
            release_replies(api, &mut writer)?;
        }
    }
    release_replies(api, &mut writer)
}

/// The message of a request refused by a master that may not answer now.
const MSG_NOT_SERVING: &str = "this master is not serving (not the leader, or its lease lapsed)";

/// Sends the buffered replies once the API allows it (`before_reply`). A master that
/// stopped serving meanwhile (its lease lapsed while a change waited for standbys)
/// sends none of them: they are dropped and the connection ends, so its client asks
/// the next leader instead of taking an acknowledgement the next leader may not hold.
fn release_replies(api: &dyn MasterApi, writer: &mut BufWriter<TcpStream>) -> io::Result<()> {
    api.before_reply();
    if !api.serving() {
        // Shut first: the buffered replies cannot leave when the writer is dropped.
        let _ = writer.get_ref().shutdown(Shutdown::Both);
        return Err(io::Error::other("stopped serving; replies withheld"));
    }
    writer.flush()
}
