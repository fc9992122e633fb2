//! What the conductor is told: the scheduling policy, the block size, SLO defaults and
//! the cost model its predictors start from.

use serde::Deserialize;

/// How a prefill instance is picked (`--policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Any prefill instance, uniformly at random.
    Random,
    /// Prefill instances in turn.
    RoundRobin,
    /// The prefill instance with the shortest predicted queue.
    LeastLoaded,
    /// The lowest predicted TTFT using only each instance's own cached prefix.
    LocalCacheAware,
    /// The paper's Algorithm 1: the lowest predicted TTFT where an instance may first
    /// pull the longest cached prefix from wherever it is, when that beats recomputing.
    GlobalCacheAware,
}

impl Policy {
    /// Every policy, in the order reports list them.
    pub const ALL: [Policy; 5] = [
        Policy::Random,
        Policy::RoundRobin,
        Policy::LeastLoaded,
        Policy::LocalCacheAware,
        Policy::GlobalCacheAware,
    ];

    /// Reads a `--policy` value.
    pub fn parse(s: &str) -> Result<Policy, UnknownPolicy> {
        Policy::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| UnknownPolicy {
                value: s.to_string(),
            })
    }

    /// The policy's `--policy` name.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Random => "random",
            Policy::RoundRobin => "round_robin",
            Policy::LeastLoaded => "least_loaded",
            Policy::LocalCacheAware => "local_cache_aware",
            Policy::GlobalCacheAware => "global_cache_aware",
        }
    }
}

/// A `--policy` value that names no policy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown policy {value:?} (one of {})", policy_names())]
pub struct UnknownPolicy {
    /// The value given.
    pub value: String,
}

/// Every policy's name, comma-separated.
fn policy_names() -> String {
    let names: Vec<&str> = Policy::ALL.iter().map(|p| p.name()).collect();
    names.join(", ")
}

/// Why a cost model was not read.
#[derive(Debug, thiserror::Error)]
pub enum CostModelError {
    /// The JSON is malformed or has unknown fields.
    #[error("cost model: {0}")]
    Json(#[from] serde_json::Error),
    /// A figure is negative, infinite or not a number.
    #[error("cost model: every figure must be a finite number >= 0")]
    NotFinite,
    /// `transfer.bandwidth_gbps` is zero.
    #[error("cost model: transfer.bandwidth_gbps must be > 0")]
    NoBandwidth,
    /// The file named by the flag cannot be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// What failed.
        source: std::io::Error,
    },
}

/// Prefill time: `base_ms + ms_per_1k_tokens * n / 1000 + ms_per_1m_token_pairs * n *
/// (prefix + n / 2) / 1e6`, where `n` tokens are computed after `prefix` cached ones
/// (the last term is attention over the context).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PrefillCost {
    /// Fixed cost of one prefill.
    pub base_ms: f64,
    /// Cost per thousand computed tokens.
    pub ms_per_1k_tokens: f64,
    /// Cost per million (computed token, context token) pairs.
    pub ms_per_1m_token_pairs: f64,
}

impl Default for PrefillCost {
    fn default() -> Self {
        PrefillCost {
            base_ms: 20.0,
            ms_per_1k_tokens: 120.0,
            ms_per_1m_token_pairs: 6.0,
        }
    }
}

/// Moving cached blocks between instances: `base_ms + blocks * block_bytes /
/// bandwidth`.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TransferCost {
    /// Fixed cost of one transfer.
    pub base_ms: f64,
    /// Bytes of KV cache in one block.
    pub block_bytes: f64,
    /// Link bandwidth, in gigabits per second.
    pub bandwidth_gbps: f64,
}

impl Default for TransferCost {
    fn default() -> Self {
        // A 70B-class model with grouped-query attention keeps about 320 KiB of KV cache
        // per token: 160 MiB per 512-token block, over a 100 Gb/s NIC.
        TransferCost {
            base_ms: 2.0,
            block_bytes: 512.0 * 327_680.0,
            bandwidth_gbps: 100.0,
        }
    }
}

impl TransferCost {
    /// Milliseconds per block at the configured bandwidth.
    pub fn ms_per_block(&self) -> f64 {
        if self.bandwidth_gbps <= 0.0 {
            return f64::INFINITY;
        }
        self.block_bytes * 8.0 / (self.bandwidth_gbps * 1e6)
    }
}

/// Time between tokens of a decode instance: `base_ms + ms_per_request * batch +
/// ms_per_1k_context * context_tokens / 1000`, over the requests it is decoding.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DecodeCost {
    /// Time per token of a batch of one with no context.
    pub base_ms: f64,
    /// Added per request in the batch.
    pub ms_per_request: f64,
    /// Added per thousand tokens of context held by the batch.
    pub ms_per_1k_context: f64,
}

impl Default for DecodeCost {
    fn default() -> Self {
        DecodeCost {
            base_ms: 15.0,
            ms_per_request: 0.5,
            ms_per_1k_context: 0.05,
        }
    }
}

/// The cost model (`--cost_model` JSON): the prior the conductor's predictors start
/// from, and what `conductor_sim`'s simulated instances take.
#[derive(Debug, Clone, Copy, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CostModel {
    /// Prefill time.
    pub prefill: PrefillCost,
    /// Block transfer time.
    pub transfer: TransferCost,
    /// Decode time between tokens.
    pub decode: DecodeCost,
}

impl CostModel {
    /// Reads a cost model from JSON; fields left out keep their defaults.
    pub fn from_json(text: &str) -> Result<CostModel, CostModelError> {
        let model: CostModel = serde_json::from_str(text)?;
        let all = [
            model.prefill.base_ms,
            model.prefill.ms_per_1k_tokens,
            model.prefill.ms_per_1m_token_pairs,
            model.transfer.base_ms,
            model.transfer.block_bytes,
            model.transfer.bandwidth_gbps,
            model.decode.base_ms,
            model.decode.ms_per_request,
            model.decode.ms_per_1k_context,
        ];
        if all.iter().any(|v| !v.is_finite() || *v < 0.0) {
            return Err(CostModelError::NotFinite);
        }
        if model.transfer.bandwidth_gbps == 0.0 {
            return Err(CostModelError::NoBandwidth);
        }
        Ok(model)
    }

    /// Reads a flag's value: inline JSON (starting with `{`) or a file holding it;
    /// empty for the defaults.
    pub fn from_flag(value: &str) -> Result<CostModel, CostModelError> {
        match value.trim() {
            "" => Ok(CostModel::default()),
            text if text.starts_with('{') => CostModel::from_json(text),
            path => CostModel::from_json(&std::fs::read_to_string(path).map_err(|source| {
                CostModelError::Read {
                    path: path.to_string(),
                    source,
                }
            })?),
        }
    }

    /// Predicted prefill time of `computed` tokens after `prefix` cached ones.
    pub fn prefill_ms(&self, computed: f64, prefix: f64) -> f64 {
        let p = &self.prefill;
        p.base_ms
            + p.ms_per_1k_tokens * computed / 1e3
            + p.ms_per_1m_token_pairs * computed * (prefix + computed / 2.0) / 1e6
    }

    /// Predicted time to move `blocks` cached blocks.
    pub fn transfer_ms(&self, blocks: f64) -> f64 {
        if blocks <= 0.0 {
            return 0.0;
        }
        self.transfer.base_ms + blocks * self.transfer.ms_per_block()
    }

    /// Predicted time between tokens of a batch of `batch` holding `context` tokens.
    pub fn tbt_ms(&self, batch: f64, context: f64) -> f64 {
        let d = &self.decode;
        d.base_ms + d.ms_per_request * batch + d.ms_per_1k_context * context / 1e3
    }
}

/// How the conductor runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ConductorConfig {
    /// The prefill policy.
    pub policy: Policy,
    /// Tokens per block (`--block_tokens`, 512 as the traces).
    pub block_tokens: u64,
    /// Default TTFT SLO in ms; 0 for none (`--ttft_slo_ms`).
    pub ttft_slo_ms: f64,
    /// Default TBT SLO in ms; 0 for none (`--tbt_slo_ms`).
    pub tbt_slo_ms: f64,
    /// Whether requests predicted to miss their SLO are refused (`--early_rejection`).
    pub early_rejection: bool,
    /// A longer prefix elsewhere is pulled only when it is at least this many times
    /// the chosen instance's own (`--balancing_threshold`; the paper's
    /// `kvcache_balancing_threshold`); and always only when moving it is predicted
    /// faster than recomputing it.
    pub balancing_threshold: f64,
    /// The predictors' prior.
    pub cost_model: CostModel,
    /// How strongly the prior holds against observations: each weight's deviation
    /// costs as much as this many observations at a typical point (`--prior_weight`).
    pub prior_weight: f64,
    /// Completions before prediction errors count as steady state (`--warmup_requests`).
    pub warmup_requests: u64,
    /// Assignments never completed are forgotten this long after their predicted end
    /// (`--assignment_timeout_ms`).
    pub assignment_timeout_ms: f64,
    /// Seed of the `random` policy (`--seed`).
    pub seed: u64,
    /// Seed of the XXH3 block hashes of `/query` (`--hash_seed`).
    pub hash_seed: u64,
}

impl Default for ConductorConfig {
    fn default() -> Self {
        ConductorConfig {
            policy: Policy::GlobalCacheAware,
            block_tokens: 512,
            ttft_slo_ms: 0.0,
            tbt_slo_ms: 0.0,
            early_rejection: true,
            balancing_threshold: 1.0,
            cost_model: CostModel::default(),
            prior_weight: 1.0,
            warmup_requests: 500,
            assignment_timeout_ms: 600_000.0,
            seed: 1,
            hash_seed: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_round_trip_by_name() {
        for p in Policy::ALL {
            assert_eq!(Policy::parse(p.name()), Ok(p));
        }
        assert!(Policy::parse("fastest")
            .unwrap_err()
            .to_string()
            .contains("round_robin"));
    }

    #[test]
    fn cost_model_json_keeps_defaults_and_refuses_nonsense() {
        let m = CostModel::from_json(r#"{"prefill": {"base_ms": 5}}"#).unwrap();
        assert_eq!(m.prefill.base_ms, 5.0);
        assert_eq!(m.decode, DecodeCost::default());
        assert!(CostModel::from_json(r#"{"prefill": {"base": 5}}"#).is_err());
        assert!(CostModel::from_json(r#"{"decode": {"base_ms": -1}}"#).is_err());
        assert!(CostModel::from_json(r#"{"transfer": {"bandwidth_gbps": 0}}"#).is_err());
    }

    #[test]
    fn default_model_figures() {
        let m = CostModel::default();
        // 160 MiB at 100 Gb/s: 13.4 ms per block.
        assert!((m.transfer.ms_per_block() - 13.42).abs() < 0.01);
        assert_eq!(m.transfer_ms(0.0), 0.0);
        // 8k tokens from scratch: 20 + 960 + 192 ms.
        assert!((m.prefill_ms(8000.0, 0.0) - 1172.0).abs() < 1e-9);
        assert!((m.tbt_ms(2.0, 10_000.0) - 16.5).abs() < 1e-9);
    }
}
