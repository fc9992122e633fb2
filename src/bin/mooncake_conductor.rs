//! `mooncake_conductor`: the KVCache-centric global scheduler as a service (README
//! "Conductor"). Serves the scheduling HTTP API and the indexer API on `--port`,
//! subscribes to the KV events of the endpoints given, and runs until SIGINT or
//! SIGTERM.

use mooncake::conductor::api::Api;
use mooncake::conductor::events::KeyReader;
use mooncake::conductor::sources::SourceSpec;
use mooncake::conductor::{Conductor, ConductorConfig, CostModel, Policy};
use mooncake::config::comma_list;
use mooncake::config::flags::{kind_in, parse_bool, run_main, FlagKind, Flags};
use mooncake::runtime::http_server::HttpServer;
use mooncake::runtime::signals;
use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;

const USAGE: &str = "\
Usage: mooncake_conductor [flags]

Picks a prefill and a decode instance for each request from where its prefix is
cached, the queues and the SLOs (POST /v1/schedule; README \"Conductor\").

Flags:
  --host 0.0.0.0                 address to serve on
  --port 13333                   HTTP port (0: any free port, printed at start)
  --policy global_cache_aware    random, round_robin, least_loaded,
                                 local_cache_aware or global_cache_aware
  --block_tokens 512             tokens per prefix block
  --ttft_slo_ms 0                default TTFT SLO (0: none); requests may set theirs
  --tbt_slo_ms 0                 default TBT SLO (0: none)
  --early_rejection true         refuse (HTTP 429) requests predicted to miss an SLO
  --balancing_threshold 1.0      pull a longer prefix from another instance only when
                                 it is at least this many times the local one (and
                                 pulling is predicted faster than recomputing)
  --cost_model \"\"                the predictors' prior: a JSON file, or inline JSON
                                 ({\"prefill\": {...}, \"transfer\": {...}, \"decode\": {...}})
  --prior_weight 1               how many observations' worth the prior holds
  --warmup_requests 500          completions before prediction errors count
  --assignment_timeout_ms 600000 forget assignments never completed this long after
                                 their predicted end
  --seed 1                       seed of the random policy
  --hash_seed 0                  XXH3 seed of /query's block hashes
  --kv_events_endpoint \"\"        KV-event publishers to subscribe to (comma-separated
                                 tcp://host:port; a Mooncake master's
                                 --kv_events_bind_endpoint, or an engine's)
  --kv_events_instance mooncake_store
                                 the instance their blocks are held by (a registered
                                 prefill instance, else a store-only holder)
  --kv_events_key_regex \"\"       for object keys that are not a hash: a pattern whose
                                 first group is the block hash
  -h, --help";

/// Known flags and whether each is boolean.
const FLAGS: &[(&str, bool)] = &[
    ("host", false),
    ("port", false),
    ("policy", false),
    ("block_tokens", false),
    ("ttft_slo_ms", false),
    ("tbt_slo_ms", false),
    ("early_rejection", true),
    ("balancing_threshold", false),
    ("cost_model", false),
    ("prior_weight", false),
    ("warmup_requests", false),
    ("assignment_timeout_ms", false),
    ("seed", false),
    ("hash_seed", false),
    ("kv_events_endpoint", false),
    ("kv_events_instance", false),
    ("kv_events_key_regex", false),
    ("help", true),
    ("h", true),
];

fn kind_of(name: &str) -> Option<FlagKind> {
    kind_in(FLAGS, name)
}

/// What the command line asks for.
#[derive(Debug)]
struct Settings {
    bind: SocketAddr,
    config: ConductorConfig,
    sources: Vec<SourceSpec>,
    keys: KeyReader,
}

fn non_negative(name: &str, v: f64) -> Result<f64, String> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(format!("--{name} must be a finite number >= 0"))
    }
}

fn settings(flags: &Flags) -> Result<Settings, String> {
    let host: IpAddr = flags
        .get("host")
        .unwrap_or("0.0.0.0")
        .parse()
        .map_err(|_| "--host must be an IP address".to_string())?;
    let port: u16 = flags.number("port", 13333)?;
    let defaults = ConductorConfig::default();
    let cost_model = CostModel::from_flag(flags.get("cost_model").unwrap_or(""))
        .map_err(|e| format!("--cost_model: {e}"))?;
    let block_tokens: u64 = flags.number("block_tokens", defaults.block_tokens)?;
    if block_tokens == 0 {
        return Err("--block_tokens must be > 0".into());
    }
    let config = ConductorConfig {
        policy: match flags.get("policy") {
            Some(p) => Policy::parse(p).map_err(|e| e.to_string())?,
            None => defaults.policy,
        },
        block_tokens,
        ttft_slo_ms: non_negative("ttft_slo_ms", flags.number("ttft_slo_ms", 0.0)?)?,
        tbt_slo_ms: non_negative("tbt_slo_ms", flags.number("tbt_slo_ms", 0.0)?)?,
        early_rejection: match flags.get("early_rejection") {
            Some(v) => parse_bool("early_rejection", v)?,
            None => defaults.early_rejection,
        },
        balancing_threshold: non_negative(
            "balancing_threshold",
            flags.number("balancing_threshold", defaults.balancing_threshold)?,
        )?,
        cost_model,
        prior_weight: non_negative(
            "prior_weight",
            flags.number("prior_weight", defaults.prior_weight)?,
        )?,
        warmup_requests: flags.number("warmup_requests", defaults.warmup_requests)?,
        assignment_timeout_ms: non_negative(
            "assignment_timeout_ms",
            flags.number("assignment_timeout_ms", defaults.assignment_timeout_ms)?,
        )?,
        seed: flags.number("seed", defaults.seed)?,
        hash_seed: flags.number("hash_seed", defaults.hash_seed)?,
    };
    let instance = flags
        .get("kv_events_instance")
        .unwrap_or("mooncake_store")
        .to_string();
    let sources = comma_list(flags.get("kv_events_endpoint").unwrap_or(""))
        .into_iter()
        .map(|endpoint| SourceSpec {
            endpoint,
            instance: instance.clone(),
            tenant: "default".into(),
            dp_rank: 0,
            kind: "Mooncake".into(),
        })
        .enumerate()
        .map(|(i, mut s)| {
            s.dp_rank = i as i64;
            s
        })
        .collect();
    let keys = KeyReader {
        pattern: match flags.get("kv_events_key_regex") {
            None | Some("") => None,
            Some(p) => {
                Some(regex::Regex::new(p).map_err(|e| format!("--kv_events_key_regex: {e}"))?)
            }
        },
    };
    Ok(Settings {
        bind: SocketAddr::new(host, port),
        config,
        sources,
        keys,
    })
}

fn run(s: Settings) -> Result<(), String> {
    let policy = s.config.policy.name();
    let conductor = Conductor::new(s.config);
    for spec in s.sources {
        let endpoint = spec.endpoint.clone();
        conductor
            .sources
            .add(&conductor, spec, s.keys.clone())
            .map_err(|e| format!("--kv_events_endpoint {endpoint}: {e}"))?;
    }
    let server = HttpServer::start(s.bind, "conductor", Arc::new(Api(conductor.clone())))
        .map_err(|e| e.to_string())?;
    eprintln!(
        "mooncake_conductor listening on {} (policy {policy})",
        server.local_addr()
    );
    signals::install_stop_handlers();
    signals::wait_for_stop();
    eprintln!("mooncake_conductor shutting down");
    server.stop();
    conductor.shutdown();
    Ok(())
}

fn main() -> ExitCode {
    run_main("mooncake_conductor", USAGE, kind_of, settings, run)
}

#[cfg(test)]
mod tests {
    use super::*;

    use mooncake::config::flags::settings_from;

    fn parse(args: &[&str]) -> Result<Settings, String> {
        settings_from(args, kind_of, settings).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_and_flags() {
        let s = parse(&[]).unwrap();
        assert_eq!(s.bind.port(), 13333);
        assert_eq!(s.config, ConductorConfig::default());
        let s = parse(&[
            "--port=0",
            "--policy=least_loaded",
            "--ttft_slo_ms=30000",
            "--noearly_rejection",
            "--cost_model={\"decode\": {\"base_ms\": 10}}",
            "--kv_events_endpoint=tcp://127.0.0.1:5557,tcp://127.0.0.1:5558",
        ])
        .unwrap();
        assert_eq!(s.config.policy, Policy::LeastLoaded);
        assert_eq!(s.config.ttft_slo_ms, 30000.0);
        assert!(!s.config.early_rejection);
        assert_eq!(s.config.cost_model.decode.base_ms, 10.0);
        assert_eq!(s.sources.len(), 2);
        assert_eq!(s.sources[1].dp_rank, 1);
    }

    #[test]
    fn refuses_bad_values() {
        for bad in [
            "--policy=best",
            "--block_tokens=0",
            "--tbt_slo_ms=-1",
            "--cost_model=/nonexistent.json",
            "--kv_events_key_regex=(",
            "--host=somewhere",
        ] {
            assert!(parse(&[bad]).is_err(), "{bad}");
        }
    }
}
