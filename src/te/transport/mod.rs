//! Transports that move bytes: TCP, RDMA, same host, and a validated memcpy for the
//! own segment; the seam they are installed behind and the registry holding them.

pub mod local;
pub mod rdma;
pub mod registry;
pub mod request;
pub mod same_host;
pub mod seam;
pub mod staging;
pub mod tcp;
