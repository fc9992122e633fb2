//! The master's RPC listener: idle connections are closed after
//! `--rpc_conn_timeout_seconds`, and a client simply reconnects on its next call.

use mooncake::master::rpc_server::RpcServer;
use mooncake::master::{MasterConfig, MasterService};
use mooncake::wire::master_api::MasterApi;
use mooncake::wire::rpc_client::MasterRpcClient;
use std::io::Read;
use std::net::TcpStream;
use std::time::Duration;

#[test]
fn idle_connections_close_and_clients_reconnect() {
    let master = MasterService::new(MasterConfig::default());
    let server = RpcServer::start(
        "127.0.0.1:0".parse().unwrap(),
        master.clone(),
        Some(Duration::from_millis(300)),
    )
    .unwrap();
    let addr = server.local_addr().to_string();

    let mut idle = TcpStream::connect(&addr).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut byte = [0u8; 1];
    assert_eq!(
        idle.read(&mut byte).unwrap(),
        0,
        "the master closes an idle connection"
    );

    let client =
        MasterRpcClient::connect(&addr, Duration::from_secs(10), Duration::from_secs(5)).unwrap();
    assert_eq!(client.service_ready().unwrap(), "2.0.0");
    std::thread::sleep(Duration::from_millis(700));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let answered = loop {
        match client.service_ready() {
            Ok(v) => break v,
            Err(e) if std::time::Instant::now() < deadline => {
                eprintln!("retrying after {e}");
            }
            Err(e) => panic!("client never recovered: {e}"),
        }
    };
    assert_eq!(answered, "2.0.0");
}
