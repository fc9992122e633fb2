//! [`MsgType`]: the type byte of an RPC frame (spec §3.3).

use crate::codec::code_enum::code_enum;

code_enum! {
    /// The message type carried in a frame's type byte (spec §3.3).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum MsgType: u8 {
        /// RDMA QP handshake (`HandShakeDesc`); also what a legacy untyped frame means.
        Connection = 0,
        /// P2P segment descriptor exchange.
        Metadata = 1,
        /// A notification message.
        Notify = 2,
        /// Liveness probe.
        Probe = 3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msg_type_round_trips() {
        for b in 0u8..=255 {
            match MsgType::from_code(b) {
                Some(t) => assert_eq!(t.code(), b),
                None => assert!(b > 3),
            }
        }
    }
}
