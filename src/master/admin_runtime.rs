//! What a master tells about its place in the cluster on its admin port, in upstream's
//! words: `/health`, `/role`, `/ha_status` and `/leader`, for a plain master (always
//! the serving leader) and an HA one alike.

use crate::runtime::http_server::HttpReply;
use serde_json::json;

/// Upstream's runtime states (`MasterRuntimeState`), as `/ha_status` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeState {
    /// Not yet part of the cluster.
    Starting,
    /// Following the leader.
    Standby,
    /// Trying to become (or stay) the leader without serving.
    Candidate,
    /// The leader, serving.
    Serving,
}

impl RuntimeState {
    /// The state's name (`/ha_status`, `ha_state`).
    pub fn name(self) -> &'static str {
        match self {
            RuntimeState::Starting => "starting",
            RuntimeState::Standby => "standby",
            RuntimeState::Candidate => "candidate",
            RuntimeState::Serving => "serving",
        }
    }

    /// The role it means (`/role`): only a serving master is the leader.
    pub fn role(self) -> &'static str {
        match self {
            RuntimeState::Serving => "leader",
            _ => "standby",
        }
    }
}

/// A master's runtime view: its state and the leader it knows of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeView {
    /// Its state.
    pub state: RuntimeState,
    /// The leader's RPC address as last seen (HA only).
    pub leader: Option<String>,
    /// The leader's view version (HA only).
    pub view_version: Option<i64>,
    /// Whether a standby holds a whole, current copy of the leader's metadata (our
    /// addition to `/health`; `None` leaves the field out).
    pub in_sync: Option<bool>,
}

impl RuntimeView {
    /// A master without HA: the serving leader, no leader view.
    pub fn plain() -> RuntimeView {
        RuntimeView {
            state: RuntimeState::Serving,
            leader: None,
            view_version: None,
            in_sync: None,
        }
    }

    /// The reply to `path` when it is one of the runtime routes.
    pub fn route(&self, path: &str) -> Option<HttpReply> {
        let json_reply = |value: serde_json::Value| HttpReply {
            status: 200,
            content_type: "application/json",
            body: value.to_string().into_bytes(),
        };
        match path {
            "/health" => {
                let mut value = json!({
                    "status": "ok",
                    "role": self.state.role(),
                    "ha_state": self.state.name(),
                    "service_ready": self.state == RuntimeState::Serving,
                    "leader_address": self.leader,
                    "view_version": self.view_version,
                });
                if let Some(in_sync) = self.in_sync {
                    value["in_sync"] = json!(in_sync);
                }
                Some(json_reply(value))
            }
            "/role" => Some(HttpReply::text(200, self.state.role())),
            "/ha_status" => Some(HttpReply::text(200, self.state.name())),
            "/leader" => Some(json_reply(json!({
                "present": self.leader.is_some(),
                "leader_address": self.leader,
                "view_version": self.view_version,
            }))),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(reply: Option<HttpReply>) -> String {
        String::from_utf8(reply.expect("a runtime route").body).unwrap()
    }

    #[test]
    fn a_plain_master_is_the_serving_leader_with_no_leader_view() {
        let view = RuntimeView::plain();
        assert_eq!(body(view.route("/role")), "leader");
        assert_eq!(body(view.route("/ha_status")), "serving");
        assert_eq!(
            body(view.route("/leader")),
            r#"{"leader_address":null,"present":false,"view_version":null}"#
        );
        assert_eq!(
            body(view.route("/health")),
            r#"{"ha_state":"serving","leader_address":null,"role":"leader","service_ready":true,"status":"ok","view_version":null}"#
        );
        assert!(view.route("/metrics").is_none());
    }

    #[test]
    fn a_standby_names_its_leader() {
        let view = RuntimeView {
            state: RuntimeState::Standby,
            leader: Some("10.0.0.1:50051".into()),
            view_version: Some(7),
            in_sync: Some(true),
        };
        assert_eq!(body(view.route("/role")), "standby");
        assert_eq!(body(view.route("/ha_status")), "standby");
        let leader: serde_json::Value = serde_json::from_str(&body(view.route("/leader"))).unwrap();
        assert_eq!(
            leader,
            json!({"present": true, "leader_address": "10.0.0.1:50051", "view_version": 7})
        );
        let health: serde_json::Value = serde_json::from_str(&body(view.route("/health"))).unwrap();
        assert_eq!(health["service_ready"], false);
        assert_eq!(health["in_sync"], true);
        assert_eq!(RuntimeState::Candidate.role(), "standby");
        assert_eq!(RuntimeState::Starting.name(), "starting");
    }
}
