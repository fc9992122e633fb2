//! [`BufferDesc`]: one buffer as a segment descriptor lists it, shared by the
//! descriptor and its RDMA part.

/// One published memory buffer of a TCP segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferDesc {
    /// Buffer name (the segment name, for TCP).
    pub name: String,
    /// Absolute virtual address in the owning process.
    pub addr: u64,
    /// Length in bytes.
    pub length: u64,
}
