// mooncake-rs: upstream Mooncake's `mooncake::TransferMetadata` (transfer_metadata.h),
// as the C++ Transfer Engine API exposes it: the notification and descriptor types,
// and the segment descriptors an engine has cached (`getSegmentDescByName`,
// `getSegmentDescByID`), which programs read to learn a peer's buffer addresses.
// Header-only, over the C ABI (transfer_engine_c.h, mooncake_ext.h).
//
// What differs from upstream, by design:
// * A TransferMetadata is obtained from `TransferEngine::getMetadata()` only; it reads
//   through its engine (upstream's public constructor from a connection string, and its
//   publishing, handshake and RPC members, are not offered: they are the engine's
//   internals).
// * A descriptor carries the segment's name (when looked up by name) and each buffer's
//   address and length. `protocol`, device lists, topology and RDMA keys are not
//   exposed by the C ABI and are left empty.
#ifndef MOONCAKE_RS_TRANSFER_METADATA_H
#define MOONCAKE_RS_TRANSFER_METADATA_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mooncake_ext.h"
#include "transfer_engine_c.h"

namespace mooncake {

class TransferEngine;

/// The segment descriptors an engine knows, and the metadata types of its API.
class TransferMetadata {
   public:
    /// Identifies an open segment (an id from `openSegment`).
    using SegmentID = uint64_t;

    /// One registered buffer of a segment.
    struct BufferDesc {
        /// Location name (not exposed by this build: empty).
        std::string name;
        /// Absolute address in the owning process.
        uint64_t addr = 0;
        /// Length in bytes.
        uint64_t length = 0;
        /// CUDA device of the buffer (-1: host memory).
        int32_t device_id = -1;
        /// RDMA keys (not exposed by this build: empty).
        std::vector<uint32_t> lkey;
        std::vector<uint32_t> rkey;
    };

    /// A segment's descriptor as published by its engine.
    struct SegmentDesc {
        /// The segment's name (set when looked up by name).
        std::string name;
        /// Its transport (not exposed by this build: empty).
        std::string protocol;
        /// Its registered buffers, in descriptor order.
        std::vector<BufferDesc> buffers;
    };

    /// A notification between engines: a sender-chosen name and a message.
    struct NotifyDesc {
        std::string name;
        std::string notify_msg;
    };

    /// The descriptor of `segment_name` (opening the segment on the engine), re-read
    /// from the metadata store when `force_update`; nullptr when it cannot be opened.
    std::shared_ptr<SegmentDesc> getSegmentDescByName(const std::string& segment_name,
                                                      bool force_update = false) {
        const segment_id_t id = force_update ? openSegmentNoCache(engine_, segment_name.c_str())
                                             : openSegment(engine_, segment_name.c_str());
        if (id < 0) return nullptr;
        auto desc = read(id);
        if (desc) desc->name = segment_name;
        return desc;
    }

    /// The descriptor of the open segment `segment_id` (LOCAL_SEGMENT: the engine's
    /// own), refreshed first when `force_update`; nullptr when it is not open.
    std::shared_ptr<SegmentDesc> getSegmentDescByID(SegmentID segment_id,
                                                    bool force_update = false) {
        if (segment_id > static_cast<SegmentID>(INT32_MAX)) return nullptr;
        if (force_update) syncSegmentCache(engine_);
        return read(static_cast<segment_id_t>(segment_id));
    }

   private:
    friend class TransferEngine;
    explicit TransferMetadata(transfer_engine_t engine) : engine_(engine) {}

    std::shared_ptr<SegmentDesc> read(segment_id_t id) const {
        uint64_t addr = 0, length = 0;
        const int count = mooncake_te_segment_buffer(engine_, id, 0, &addr, &length);
        if (count < 0) return nullptr;
        auto desc = std::make_shared<SegmentDesc>();
        for (int i = 0; i < count; i++) {
            if (i > 0 &&
                mooncake_te_segment_buffer(engine_, id, static_cast<size_t>(i), &addr, &length) < 0)
                return nullptr;
            BufferDesc buffer;
            buffer.addr = addr;
            buffer.length = length;
            desc->buffers.push_back(buffer);
        }
        return desc;
    }

    transfer_engine_t engine_;
};

}  // namespace mooncake

#endif  // MOONCAKE_RS_TRANSFER_METADATA_H
