//! `store_bench`: Mooncake Store benchmarks and helper processes (spec store.md §5).
//!
//! Modes (`--mode=`):
//! * `serve`: sets up a store client that mounts a `--global_segment_size` segment,
//!   prints `store_bench serving segment <hostname>` on stderr, and keeps it mounted
//!   until SIGINT/SIGTERM (then closes cleanly). Benchmarks and fault tests use it as
//!   a separate segment-owner process.
//! * `client`: the client-operations benchmark (`put`, `get`, `put_from`, `get_into`,
//!   `batch_put_from`, `batch_get_into`) at each of `--value_sizes`. With the default
//!   `--global_segment_size=0` every value lands in another process's segment (a
//!   `serve` process), so every byte crosses the Transfer Engine over TCP, like
//!   upstream's two-process baseline (spec §5.3). Prints an aligned table and one
//!   `ROW op=<op> size=<n> ops=<ops/s> mbps=<MB/s> p50=<us> p99=<us> errors=<n>` line
//!   per row.
//! * `pressure`: a cache workload over an oversubscribed pool (`--keys` keys of
//!   `--value_min..=--value_max` bytes, `--mix` put/get/remove), every read checked;
//!   prints the failed-put rate (see `store_bench/pressure.rs`).
//! * `master_load`: a metadata load generator speaking coro_rpc to a master (ours or
//!   upstream's) through [`MasterRpcClient`]: it mounts a fake segment (the master
//!   never touches segment memory), then `--threads` threads, each with its own
//!   connection, run `PutStart`+`PutEnd` of new keys, `GetReplicaList` and `ExistKey`
//!   of existing keys, and a mix of the three, `--duration` seconds each.
//! * `master_fill`: puts `--objects` small objects (pipelined across `--threads`
//!   connections, `--fill_batch` keys per `BatchPutStart`/`BatchPutEnd`), prints
//!   `filled <N> objects`, then (with `--hold`, the default) keeps its fake client
//!   alive until SIGINT/SIGTERM so the master's memory can be measured.
//! * `round_trip`: `--ops` 64-byte ping-pongs over loopback TCP between two threads
//!   blocking in `read`: the cost of one small call on this host without
//!   busy-polling, printed as `ROUND_TRIP p50=<us> p99=<us>`.
//! * `null_master`: a coro_rpc server that answers like a master but does no work
//!   (see `store_bench/null_master.rs`): the ceiling `bench/master_load.sh` measures
//!   both masters against.
//!
//! The load modes ping the master every second from a side thread and remount the
//! fake segment when the master answers NEED_REMOUNT, so the fake client never
//! expires.
//!
//! [`MasterRpcClient`]: mooncake::wire::rpc_client::MasterRpcClient

#[path = "store_bench/client_ops.rs"]
mod client_ops;
#[path = "store_bench/fake_client.rs"]
mod fake_client;
#[path = "store_bench/master_load.rs"]
mod master_load;
#[path = "store_bench/null_master.rs"]
mod null_master;
#[path = "store_bench/phase.rs"]
mod phase;
#[path = "store_bench/pipeline.rs"]
mod pipeline;
#[path = "store_bench/pressure.rs"]
mod pressure;
#[path = "store_bench/round_trip.rs"]
mod round_trip;
#[path = "store_bench/settings.rs"]
mod settings;
#[path = "store_bench/stats.rs"]
mod stats;

use mooncake::config::flags::{exit_status, run_or_exit};
use mooncake::host::logger;
use mooncake::runtime::signals;
use settings::{Mode, Settings};
use std::process::ExitCode;

fn main() -> ExitCode {
    logger::install();
    let usage = settings::USAGE;
    let refusal = |e: &str| format!("store_bench: {e}\n\n{usage}");
    let settings = match run_or_exit(
        Settings::from_args(std::env::args().skip(1)),
        usage,
        refusal,
    ) {
        Ok(s) => s,
        Err(code) => return code,
    };
    signals::install_stop_handlers();
    let result = match settings.mode {
        Mode::Serve => client_ops::serve(&settings),
        Mode::Client => client_ops::run(&settings),
        Mode::Pressure => pressure::run(&settings),
        Mode::MasterLoad => master_load::load(&settings),
        Mode::MasterFill => master_load::fill(&settings),
        Mode::RoundTrip => round_trip::run(&settings),
        Mode::NullMaster => null_master::run(&settings),
    };
    exit_status(result, "store_bench")
}
