// mooncake-rs: upstream Mooncake's `mooncake::Transport` (transport/transport.h) as
// the C++ Transfer Engine API uses it: the request, status, buffer and NIC-load types
// nested in it, and the handle `installTransport` returns. Header-only.
//
// A Transport here is an opaque handle owned by its engine (valid until the engine is
// freed): programs test it for nullptr and may ask its name. Upstream's virtual
// transport interface (its slices, batch descriptors and per-transport submission) is
// the engine's internals and is not offered.
#ifndef MOONCAKE_RS_TRANSPORT_H
#define MOONCAKE_RS_TRANSPORT_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "../common/base/status.h"
#include "../transfer_metadata.h"

namespace mooncake {

class TransferEngine;

/// A transport installed in an engine, and the types of the transfer API.
class Transport {
   public:
    using SegmentID = uint64_t;
    using SegmentHandle = SegmentID;
    using BatchID = uint64_t;
    using BufferDesc = TransferMetadata::BufferDesc;
    using SegmentDesc = TransferMetadata::SegmentDesc;
    using NotifyDesc = TransferMetadata::NotifyDesc;

    /// One transfer: `length` bytes between local `source` and `target_offset` (an
    /// absolute address in the target process) of segment `target_id`.
    struct TransferRequest {
        enum OpCode { READ, WRITE };

        static constexpr uint64_t kNoTaskGroup = 0;

        OpCode opcode;
        void* source;
        SegmentID target_id;
        uint64_t target_offset;
        size_t length;
        /// Accepted and ignored: the engine retries broken connections itself.
        int advise_retry_cnt = 0;
        /// Accepted and ignored (a TENT transport pin).
        int transport_hint = 0;
        /// Accepted and ignored (requests are scheduled one by one).
        uint64_t task_group_id = kNoTaskGroup;
    };

    /// A task's state (the values of the C API's STATUS_* constants).
    enum TransferStatusEnum { WAITING, PENDING, INVALID, CANCELED, COMPLETED, TIMEOUT, FAILED };

    /// A task's (or a batch's) state and the bytes it moved.
    struct TransferStatus {
        TransferStatusEnum s;
        size_t transferred_bytes;
    };

    /// Load of one RDMA NIC.
    struct NicLoadStats {
        std::string device_name;
        uint64_t inflight_bytes{0};
        double ewma_bandwidth_bps{0.0};
    };

    /// One region of `registerLocalMemoryBatch`.
    struct BufferEntry {
        void* addr;
        size_t length;
    };

    /// The protocol this transport speaks ("tcp", "rdma").
    const char* getName() const { return name_.c_str(); }

    Transport(const Transport&) = delete;
    Transport& operator=(const Transport&) = delete;

   private:
    friend class TransferEngine;
    explicit Transport(std::string name) : name_(std::move(name)) {}
    std::string name_;
};

}  // namespace mooncake

#endif  // MOONCAKE_RS_TRANSPORT_H
