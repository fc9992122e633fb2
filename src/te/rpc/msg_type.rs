//! [`MsgType`]: the type byte of an RPC frame (spec §3.3).

/// The message type carried in a frame's type byte (spec §3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MsgType {
    /// RDMA QP handshake (`HandShakeDesc`); also what a legacy untyped frame means.
    Connection = 0,
    /// P2P segment descriptor exchange.
    Metadata = 1,
    /// A notification message.
    Notify = 2,
    /// Liveness probe.
    Probe = 3,
}

impl MsgType {
    /// The type for a type byte, or `None` when the byte is not a known type (> 3).
    pub fn from_u8(byte: u8) -> Option<MsgType> {
        match byte {
            0 => Some(MsgType::Connection),
            1 => Some(MsgType::Metadata),
            2 => Some(MsgType::Notify),
            3 => Some(MsgType::Probe),
            _ => None,
        }
    }

    /// The wire value of this type.
    pub fn as_u8(self) -> u8 {
        self as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msg_type_round_trips() {
        for b in 0u8..=255 {
            match MsgType::from_u8(b) {
                Some(t) => assert_eq!(t.as_u8(), b),
                None => assert!(b > 3),
            }
        }
    }
}
