//! Transports that move bytes: TCP, and a validated memcpy for the own segment.

pub mod local;
pub mod tcp;
