//! Which replica a read takes: a complete memory replica, the nearest first (this
//! client's own segment, then a segment on the same host, then any other).

use crate::wire::master_api::{
    BufferDescriptor, ErrorCode, ReplicaDescriptor, ReplicaLocation, ReplicaStatus,
};

/// How near a replica's owner is, as the reader sees it.
pub(crate) trait Nearness {
    /// Whether the TE segment `endpoint` is the reader's own.
    fn is_own_endpoint(&self, endpoint: &str) -> bool;
    /// Whether the TE segment `endpoint` belongs to an engine on the reader's host.
    fn is_same_host(&self, endpoint: &str) -> bool;
}

/// The replica to read among `replicas`: a complete memory replica, the reader's own
/// first, then one on the same host, then the first. -703 when there are no
/// replicas, -702 when none is a complete memory replica. Nearness is asked only when
/// there is a choice to make.
pub(crate) fn choose<'a>(
    replicas: &'a [ReplicaDescriptor],
    near: &impl Nearness,
) -> Result<&'a BufferDescriptor, ErrorCode> {
    let memory: Vec<&BufferDescriptor> = replicas
        .iter()
        .filter_map(|r| match &r.location {
            ReplicaLocation::Memory(d) if r.status == ReplicaStatus::Complete => Some(d),
            _ => None,
        })
        .collect();
    let chosen = match memory.as_slice() {
        [] => None,
        [only] => Some(*only),
        several => several
            .iter()
            .find(|d| near.is_own_endpoint(&d.transport_endpoint))
            .or_else(|| {
                several
                    .iter()
                    .find(|d| near.is_same_host(&d.transport_endpoint))
            })
            .or(several.first())
            .copied(),
    };
    match chosen {
        Some(d) => Ok(d),
        None if replicas.is_empty() => Err(ErrorCode::REPLICA_IS_NOT_READY),
        None => Err(ErrorCode::INVALID_REPLICA),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Segments "own", "near-*" (same host) and anything else (remote).
    struct Fake;

    impl Nearness for Fake {
        fn is_own_endpoint(&self, endpoint: &str) -> bool {
            endpoint == "own"
        }
        fn is_same_host(&self, endpoint: &str) -> bool {
            endpoint.starts_with("near")
        }
    }

    fn replica(endpoint: &str, status: ReplicaStatus) -> ReplicaDescriptor {
        ReplicaDescriptor {
            id: 1,
            location: ReplicaLocation::Memory(BufferDescriptor {
                size: 8,
                buffer_address: 0x1000,
                protocol: "tcp".into(),
                transport_endpoint: endpoint.into(),
            }),
            status,
        }
    }

    fn chosen(endpoints: &[&str]) -> String {
        let replicas: Vec<_> = endpoints
            .iter()
            .map(|e| replica(e, ReplicaStatus::Complete))
            .collect();
        choose(&replicas, &Fake).unwrap().transport_endpoint.clone()
    }

    #[test]
    fn own_then_same_host_then_remote() {
        assert_eq!(chosen(&["remote-a", "near-b", "own"]), "own");
        assert_eq!(chosen(&["remote-a", "near-b", "near-c"]), "near-b");
        assert_eq!(chosen(&["remote-a", "remote-b"]), "remote-a");
        assert_eq!(chosen(&["remote-a"]), "remote-a");
    }

    #[test]
    fn only_complete_memory_replicas_count() {
        let replicas = vec![
            replica("near-a", ReplicaStatus::Processing),
            replica("remote-b", ReplicaStatus::Complete),
        ];
        assert_eq!(
            choose(&replicas, &Fake).unwrap().transport_endpoint,
            "remote-b"
        );
        let pending = vec![replica("near-a", ReplicaStatus::Processing)];
        assert_eq!(choose(&pending, &Fake), Err(ErrorCode::INVALID_REPLICA));
        assert_eq!(choose(&[], &Fake), Err(ErrorCode::REPLICA_IS_NOT_READY));
    }
}
