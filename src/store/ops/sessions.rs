//! Put and get sessions of [`Client`] (upstream's `batch_put_session_start`,
//! `batch_put_from_multi_buffer_ranges`, `batch_put_session_end`,
//! `batch_put_session_revoke`, `batch_get_session_start`,
//! `batch_get_into_multi_buffer_ranges`, `batch_get_session_end`; spec sessions §A).
//! Starts, ends and revokes are one batch master call each; ranged calls make none
//! and move every fragment of the call in one transfer batch. Results are upstream's
//! codes per key (the ranged calls: bytes moved per key).

use crate::store::sessions::{GetSession, Place, PutSession};
use crate::store::transfer::Move;
use crate::store::vocab::Fragments;
use crate::store::{Client, ErrorCode, ReplicateConfig};
use crate::te::Op;
use crate::wire::master_api::{ObjectMeta, ReplicaLocation, ReplicaStatus, ReplicaType};
use std::time::{Duration, Instant};

/// -600.
const INVALID: i64 = ErrorCode::INVALID_PARAMS.0 as i64;

/// The memory replicas among `replicas` that are COMPLETE (`complete`) or any.
fn places(replicas: &[crate::wire::master_api::ReplicaDescriptor], complete: bool) -> Vec<Place> {
    replicas
        .iter()
        .filter(|r| !complete || r.status == ReplicaStatus::Complete)
        .filter_map(|r| match &r.location {
            ReplicaLocation::Memory(b) => Some(Place {
                endpoint: b.transport_endpoint.clone(),
                addr: b.buffer_address,
                size: b.size,
            }),
            _ => None,
        })
        .collect()
}

/// Whether every fragment lies inside an object of `size` bytes.
fn inside(frags: &Fragments, size: u64) -> bool {
    frags
        .iter()
        .all(|&(_, len, off)| len <= size && off <= size - len)
}

impl Client {
    /// `batch_get_session_start`: one `BatchGetReplicaList`; per key 0, the master's
    /// code, -707 when the lease ran out already, -702 without a complete memory
    /// replica. A replica in this client's own segment is preferred.
    pub fn get_session_start(&self, keys: &[&str]) -> Vec<i32> {
        let Ok(state) = self.state() else {
            return vec![ErrorCode::INVALID_PARAMS.0; keys.len()];
        };
        if keys.is_empty() {
            return Vec::new();
        }
        let t0 = Instant::now();
        let owned: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        let results = match state
            .master()
            .batch_get_replica_list(&owned, state.tenant())
        {
            Ok(r) if r.len() == keys.len() => r,
            Ok(_) => return vec![ErrorCode::RPC_FAIL.0; keys.len()],
            Err(e) => return vec![e.0; keys.len()],
        };
        keys.iter()
            .zip(results)
            .map(|(key, r)| {
                self.sessions().end_get(key);
                let resp = match r {
                    Ok(resp) => resp,
                    Err(e) => return e.0,
                };
                let deadline = t0 + Duration::from_millis(resp.lease_ttl_ms);
                if Instant::now() >= deadline {
                    return ErrorCode::LEASE_EXPIRED.0;
                }
                let candidates = places(&resp.replicas, true);
                let chosen = candidates
                    .iter()
                    .find(|p| state.is_own_endpoint(&p.endpoint))
                    .or(candidates.first());
                match chosen {
                    None => ErrorCode::INVALID_REPLICA.0,
                    Some(place) => {
                        self.sessions().set_get(
                            key,
                            GetSession {
                                place: place.clone(),
                                deadline,
                            },
                        );
                        0
                    }
                }
            })
            .collect()
    }

    /// `batch_get_into_multi_buffer_ranges`: reads each key's fragments from its get
    /// session's replica; per key the bytes read, -600 (no session, a fragment outside
    /// the object), -707 (the lease ran out: the session ends), -800.
    ///
    /// # Safety
    /// Every fragment's local range must be writable for its length and not touched
    /// by Rust references until this returns.
    pub unsafe fn get_ranges(&self, keys: &[&str], frags: &[Fragments]) -> Vec<i64> {
        let mut out = vec![INVALID; keys.len()];
        let Ok(state) = self.state() else {
            return out;
        };
        let mut moves = Vec::new();
        let mut owners = Vec::new();
        for (i, (key, fr)) in keys.iter().zip(frags).enumerate() {
            let Some(s) = self.sessions().get(key) else {
                continue;
            };
            if Instant::now() >= s.deadline {
                self.sessions().end_get(key);
                out[i] = ErrorCode::LEASE_EXPIRED.0 as i64;
                continue;
            }
            if !inside(fr, s.place.size) {
                continue;
            }
            out[i] = fr.iter().map(|f| f.1 as i64).sum();
            for &(local, len, off) in fr {
                moves.push(Move {
                    local,
                    remote: s.place.addr + off,
                    len,
                    endpoint: s.place.endpoint.clone(),
                });
                owners.push(i);
            }
        }
        // SAFETY: the caller's contract covers every fragment's local range.
        let results = unsafe { state.execute(Op::Read, &moves) };
        for (i, r) in owners.into_iter().zip(results) {
            if let Err(e) = r {
                if out[i] >= 0 {
                    out[i] = i64::from(e.code.0);
                }
            }
        }
        for (i, key) in keys.iter().enumerate() {
            if out[i] >= 0
                && self
                    .sessions()
                    .get(key)
                    .is_some_and(|s| Instant::now() >= s.deadline)
            {
                self.sessions().end_get(key);
                out[i] = ErrorCode::LEASE_EXPIRED.0 as i64;
            }
        }
        out
    }

    /// `batch_get_session_end`: forgets the get sessions of `keys`.
    pub fn get_session_end(&self, keys: &[&str]) {
        for key in keys {
            self.sessions().end_get(key);
        }
    }

    /// `batch_put_session_start`: one `BatchPutStart` for the keys without a put
    /// session; per key 0, -600 (a session already, or a bad request), the master's
    /// code, -702 when no memory replica was reserved (revoked).
    pub fn put_session_start(
        &self,
        keys: &[&str],
        sizes: &[u64],
        config: &ReplicateConfig,
    ) -> Vec<i32> {
        let n = keys.len();
        let Ok(state) = self.state() else {
            return vec![ErrorCode::INVALID_PARAMS.0; n];
        };
        let groups_mismatch = config.group_ids.as_ref().is_some_and(|g| g.len() != n);
        if sizes.len() != n || groups_mismatch || config.nof_replica_num > 0 {
            return vec![ErrorCode::INVALID_PARAMS.0; n];
        }
        let mut out = vec![0; n];
        let fresh: Vec<usize> = (0..n)
            .filter(|&i| !self.sessions().has_put(keys[i]))
            .collect();
        for i in (0..n).filter(|i| !fresh.contains(i)) {
            out[i] = ErrorCode::INVALID_PARAMS.0;
        }
        if fresh.is_empty() {
            return out;
        }
        let mut cfg = config.clone();
        if let Some(g) = &config.group_ids {
            cfg.group_ids = Some(fresh.iter().map(|&i| g[i].clone()).collect());
        }
        let start_keys: Vec<String> = fresh.iter().map(|&i| keys[i].to_string()).collect();
        let start_sizes: Vec<u64> = fresh.iter().map(|&i| sizes[i]).collect();
        let (m, client, tenant) = (state.master(), state.client_id(), state.tenant());
        let results = match m.batch_put_start(client, &start_keys, &start_sizes, &cfg, tenant) {
            Ok(r) if r.len() == fresh.len() => r,
            Ok(_) => {
                for &i in &fresh {
                    out[i] = ErrorCode::RPC_FAIL.0;
                }
                return out;
            }
            Err(e) => {
                for &i in &fresh {
                    out[i] = e.0;
                }
                return out;
            }
        };
        let mut no_memory = Vec::new();
        for ((&i, r), key) in fresh.iter().zip(results).zip(&start_keys) {
            match r {
                Err(e) => out[i] = e.0,
                Ok(replicas) => {
                    let places = places(&replicas, false);
                    if places.is_empty() {
                        out[i] = ErrorCode::INVALID_REPLICA.0;
                        no_memory.push(key.clone());
                    } else {
                        self.sessions().set_put(
                            key,
                            PutSession {
                                places,
                                size: sizes[i],
                                writable: true,
                                inflight: 0,
                            },
                        );
                    }
                }
            }
        }
        if !no_memory.is_empty() {
            let _ = m.batch_put_revoke(client, &no_memory, ReplicaType::All, tenant);
        }
        out
    }

    /// `batch_put_from_multi_buffer_ranges`: writes each key's fragments into every
    /// memory replica of its put session; per key the bytes written (counted once),
    /// -600 (no writable session, a fragment outside the object), -702 (nothing to
    /// write), -800.
    ///
    /// # Safety
    /// Every fragment's local range must be readable for its length until this
    /// returns.
    pub unsafe fn put_ranges(&self, keys: &[&str], frags: &[Fragments]) -> Vec<i64> {
        let mut out = vec![INVALID; keys.len()];
        let Ok(state) = self.state() else {
            return out;
        };
        let mut moves = Vec::new();
        let mut owners = Vec::new();
        let mut writing = Vec::new();
        for (i, (key, fr)) in keys.iter().zip(frags).enumerate() {
            let Some(s) = self.sessions().begin_write(key) else {
                continue;
            };
            writing.push(*key);
            if !inside(fr, s.size) {
                continue;
            }
            if fr.is_empty() {
                out[i] = ErrorCode::INVALID_REPLICA.0 as i64;
                continue;
            }
            out[i] = fr.iter().map(|f| f.1 as i64).sum();
            for &(local, len, off) in fr {
                for p in &s.places {
                    moves.push(Move {
                        local,
                        remote: p.addr + off,
                        len,
                        endpoint: p.endpoint.clone(),
                    });
                    owners.push(i);
                }
            }
        }
        // SAFETY: the caller's contract covers every fragment's local range.
        let results = unsafe { state.execute(Op::Write, &moves) };
        for (i, r) in owners.into_iter().zip(results) {
            if let Err(e) = r {
                if out[i] >= 0 {
                    out[i] = i64::from(e.code.0);
                }
            }
        }
        for key in writing {
            self.sessions().done_writing(key);
        }
        out
    }

    /// `batch_put_session_end`: seals the sessions, waits for ranged puts in flight,
    /// then one `BatchPutEnd` (memory replicas); per key 0 (the session ends), -600
    /// without a session, or the master's code (the session stays, sealed, for
    /// another end or a revoke).
    pub fn put_session_end(&self, keys: &[&str]) -> Vec<i32> {
        self.put_session_finish(keys, true)
    }

    /// `batch_put_session_revoke`: as [`Client::put_session_end`], with one
    /// `BatchPutRevoke`; -704 from the master also ends the session.
    pub fn put_session_revoke(&self, keys: &[&str]) -> Vec<i32> {
        self.put_session_finish(keys, false)
    }

    fn put_session_finish(&self, keys: &[&str], end: bool) -> Vec<i32> {
        let n = keys.len();
        let Ok(state) = self.state() else {
            return vec![ErrorCode::INVALID_PARAMS.0; n];
        };
        let found = self.sessions().seal(keys);
        let mut out = vec![ErrorCode::INVALID_PARAMS.0; n];
        let picked: Vec<usize> = (0..n).filter(|&i| found[i]).collect();
        if picked.is_empty() {
            return out;
        }
        let (m, client, tenant) = (state.master(), state.client_id(), state.tenant());
        let results = if end {
            let metas: Vec<ObjectMeta> = picked
                .iter()
                .map(|&i| ObjectMeta {
                    key: keys[i].to_string(),
                    checksum: None,
                })
                .collect();
            m.batch_put_end(client, &metas, ReplicaType::Memory, tenant)
        } else {
            let owned: Vec<String> = picked.iter().map(|&i| keys[i].to_string()).collect();
            m.batch_put_revoke(client, &owned, ReplicaType::All, tenant)
        };
        let results = match results {
            Ok(r) if r.len() == picked.len() => r,
            Ok(_) => vec![Err(ErrorCode::RPC_FAIL); picked.len()],
            Err(e) => vec![Err(e); picked.len()],
        };
        for (&i, r) in picked.iter().zip(results) {
            let code = match r {
                Ok(()) => 0,
                Err(ErrorCode::OBJECT_NOT_FOUND) if !end => 0,
                Err(e) => e.0,
            };
            out[i] = code;
            if code == 0 {
                self.sessions().end_put(keys[i]);
            }
        }
        out
    }
}
