//! Serves a [`MasterApi`] over coro_rpc on 127.0.0.1 (one thread per connection), so
//! C programs can reach an in-process master through `MOONCAKE_TEST_MASTER`.

use mooncake::wire::dispatch::serve_stream;
use mooncake::wire::master_api::MasterApi;
use std::net::TcpListener;
use std::sync::Arc;

/// Starts serving `api` on a free loopback port; returns `host:port`. The listener
/// thread lives until the test process exits.
pub fn serve(api: Arc<dyn MasterApi>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind master listener");
    let addr = listener.local_addr().expect("listener address").to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let api = api.clone();
            std::thread::spawn(move || {
                let _ = serve_stream(stream, &*api, mooncake::wire::coro_rpc::MAX_FRAME);
            });
        }
    });
    addr
}
