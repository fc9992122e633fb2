//! The indexer API of upstream's design documents (`conductor-indexer.md`, JSON):
//! `/register` and `/unregister` a KV-event publisher for an instance, `/query` by
//! token ids (hashed with the documented XXH3 chain) or `/query_by_hash` by block
//! hashes, answering per tenant and instance the longest cached prefix in tokens, per
//! medium and per data-parallel rank; `/services` lists the subscriptions.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::events::KeyReader;
use super::index::{medium, Slot};
use super::json_reply::{answer, error, json_reply, Answer, MAX_HASHES};
use super::sources::{SourceError, SourceSpec};
use super::Conductor;
use crate::runtime::http_server::HttpReply;

/// Serves one indexer endpoint (the caller checked the method).
pub fn handle(c: &Conductor, path: &str, body: &[u8]) -> HttpReply {
    match path {
        "/register" => answer(body, |b| register(c, b)),
        "/unregister" => answer(body, |b| unregister(c, b)),
        "/query" => answer(body, |b| query(c, b, true)),
        "/query_by_hash" => answer(body, |b| query(c, b, false)),
        "/services" => services(c),
        _ => error(404, &format!("no such endpoint: {path}")),
    }
}

#[derive(Deserialize)]
struct RegisterBody {
    endpoint: String,
    #[serde(default)]
    replay_endpoint: Option<String>,
    #[serde(rename = "type")]
    kind: String,
    modelname: String,
    #[serde(default)]
    lora_name: Option<String>,
    #[serde(default)]
    tenant_id: Option<String>,
    instance_id: String,
    block_size: u64,
    dp_rank: i64,
    #[serde(default)]
    additionalsalt: Option<String>,
}

fn register(c: &Conductor, b: RegisterBody) -> Answer {
    let _ = (
        &b.replay_endpoint,
        &b.modelname,
        &b.lora_name,
        &b.additionalsalt,
    );
    if !["vLLM", "SGLang", "Mooncake"].contains(&b.kind.as_str()) {
        return Err(error(400, "type must be vLLM, SGLang or Mooncake"));
    }
    if b.instance_id.is_empty() || b.block_size == 0 {
        return Err(error(
            400,
            "instance_id must not be empty and block_size must be > 0",
        ));
    }
    let spec = SourceSpec {
        endpoint: b.endpoint,
        instance: b.instance_id.clone(),
        tenant: b.tenant_id.unwrap_or_else(|| "default".into()),
        dp_rank: b.dp_rank,
        kind: b.kind,
    };
    Ok(match c.sources.add(c, spec, KeyReader::default()) {
        Ok(_) => json_reply(
            200,
            &json!({"status": "registered successfully", "instance_id": b.instance_id}),
        ),
        Err(e @ SourceError::Taken { .. }) => error(409, &e.to_string()),
        Err(e) => error(400, &e.to_string()),
    })
}

#[derive(Deserialize)]
struct UnregisterBody {
    #[serde(default)]
    tenant_id: Option<String>,
    instance_id: String,
    dp_rank: i64,
}

fn unregister(c: &Conductor, b: UnregisterBody) -> Answer {
    let tenant = b.tenant_id.unwrap_or_else(|| "default".into());
    let key = format!("{}|{tenant}|{}", b.instance_id, b.dp_rank);
    let Some(spec) = c.sources.remove(&key) else {
        return Err(error(404, &format!("no source {key:?}")));
    };
    // A store-only instance exists for its sources: it leaves with the last one.
    let still_fed = c
        .sources
        .specs()
        .iter()
        .any(|s| s.instance == spec.instance);
    if !still_fed {
        c.with(|s| {
            let store_only = s
                .instances
                .slot_of(&spec.instance)
                .and_then(|slot| s.instances.get(slot))
                .is_some_and(|i| i.spec.role == super::Role::Store);
            if store_only {
                s.unregister(&spec.instance);
            }
        });
    }
    Ok(json_reply(
        200,
        &json!({"status": "unregistered successfully", "removed_instances": [key]}),
    ))
}

#[derive(Deserialize)]
struct QueryBody {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    lora_name: Option<String>,
    #[serde(default)]
    lora_id: Option<i64>,
    #[serde(default)]
    token_ids: Option<Vec<u32>>,
    #[serde(default, alias = "block_hash")]
    seq_hashes: Option<Vec<u64>>,
    #[serde(default)]
    tenant_id: Option<String>,
    #[serde(default)]
    instance_id: Option<String>,
    block_size: u64,
    #[serde(default)]
    cache_salt: Option<String>,
}

fn query(c: &Conductor, b: QueryBody, by_tokens: bool) -> Answer {
    let _ = (&b.model, &b.lora_name, &b.lora_id, &b.cache_salt);
    if b.block_size == 0 {
        return Err(error(400, "block_size must be > 0"));
    }
    let hashes = if by_tokens {
        let Some(tokens) = b.token_ids else {
            return Err(error(400, "token_ids is required"));
        };
        let seed = c.with(|s| s.config().hash_seed);
        block_hashes(&tokens, b.block_size as usize, seed)
    } else {
        match b.seq_hashes {
            Some(h) => h,
            None => return Err(error(400, "seq_hashes is required")),
        }
    };
    if hashes.len() > MAX_HASHES {
        return Err(error(
            400,
            &format!("at most {MAX_HASHES} blocks per query"),
        ));
    }
    let tenant = b.tenant_id.unwrap_or_else(|| "default".into());
    let specs = c.sources.specs();
    let per_instance = c.with(|s| {
        let mut out = Map::new();
        let slots: Vec<(Slot, String)> = s
            .instances
            .iter()
            .map(|(slot, i)| (slot, i.spec.id.clone()))
            .filter(|(_, id)| b.instance_id.as_ref().map_or(true, |want| want == id))
            .collect();
        for (slot, id) in slots {
            let tokens = |m: u8| s.index.prefix_of(slot, &hashes, m) as u64 * b.block_size;
            let longest = tokens(medium::ALL);
            if longest == 0 && b.instance_id.is_none() {
                continue;
            }
            let mut ranks: Vec<i64> = specs
                .iter()
                .filter(|sp| sp.instance == id && sp.tenant == tenant)
                .map(|sp| sp.dp_rank)
                .collect();
            if ranks.is_empty() {
                ranks.push(0);
            }
            let dp: Map<String, Value> = ranks
                .iter()
                .map(|r| (r.to_string(), json!(longest)))
                .collect();
            out.insert(
                id,
                json!({
                    "longest_matched": longest,
                    "GPU": tokens(medium::GPU),
                    "CPU": tokens(medium::CPU),
                    "DISK": tokens(medium::DISK),
                    "DP": dp,
                }),
            );
        }
        out
    });
    Ok(json_reply(200, &json!({ tenant: per_instance })))
}

fn services(c: &Conductor) -> HttpReply {
    let list: Vec<Value> = c
        .sources
        .specs()
        .into_iter()
        .map(|s| {
            json!({
                "key": s.key(),
                "endpoint": s.endpoint,
                "type": s.kind,
                "instance_id": s.instance,
                "tenant_id": s.tenant,
                "dp_rank": s.dp_rank,
            })
        })
        .collect();
    json_reply(200, &json!({ "services": list }))
}

/// The documented block hashes of `tokens`: per complete block, XXH3-64 (seed
/// `seed`) of its tokens as little-endian u32s, chained: `h[0] = local[0]`, `h[i] =
/// XXH3(h[i-1] LE || local[i] LE)`. A trailing partial block is not hashed.
pub fn block_hashes(tokens: &[u32], block_size: usize, seed: u64) -> Vec<u64> {
    use xxhash_rust::xxh3::xxh3_64_with_seed;
    let mut out = Vec::with_capacity(tokens.len() / block_size.max(1));
    let mut bytes = Vec::with_capacity(block_size * 4);
    for block in tokens.chunks_exact(block_size.max(1)) {
        bytes.clear();
        for t in block {
            bytes.extend_from_slice(&t.to_le_bytes());
        }
        let local = xxh3_64_with_seed(&bytes, seed);
        let chained = match out.last() {
            None => local,
            Some(prev) => {
                let mut pair = [0u8; 16];
                pair[..8].copy_from_slice(&u64::to_le_bytes(*prev));
                pair[8..].copy_from_slice(&local.to_le_bytes());
                xxh3_64_with_seed(&pair, seed)
            }
        };
        out.push(chained);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::block_hashes;

    #[test]
    fn block_hashes_chain_whole_blocks_only() {
        let tokens: Vec<u32> = (0..10).collect();
        let h = block_hashes(&tokens, 4, 0);
        assert_eq!(h.len(), 2);
        assert_eq!(
            h[0],
            xxhash_rust::xxh3::xxh3_64(&[0u8, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0])
        );
        // The second depends on the first: the same tokens after another prefix differ.
        let other: Vec<u32> = [9, 9, 9, 9, 4, 5, 6, 7].to_vec();
        assert_ne!(block_hashes(&other, 4, 0)[1], h[1]);
        assert_ne!(block_hashes(&tokens, 4, 1)[0], h[0]);
    }
}
