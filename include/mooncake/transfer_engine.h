// mooncake-rs: upstream Mooncake's C++ Transfer Engine API (`mooncake::TransferEngine`,
// transfer_engine.h), source compatible: a program written against upstream's header
// compiles against this one (C++17) and links libmooncake.so. Header-only: every
// method is inline C++ over the library's C ABI (transfer_engine_c.h) and its
// extensions (mooncake_ext.h), so the library itself stays C.
//
// Build: c++ -std=c++17 app.cpp $(pkg-config --cflags --libs mooncake), or link
// Mooncake::transfer_engine from find_package(Mooncake).
//
// Differences from upstream, each by design (README "C++ API"):
// * Not offered (a call does not compile): the scatter API (`submitScatter`,
//   `transferScatter`: C++20 spans over upstream's scheduler), the multi-protocol
//   `mp_*` calls (an ENABLE_MULTI_PROTOCOL build of upstream's), the device-transport
//   accessors (CUDA builds), `getLocalTopology`, `getBaseAddr`, `numContexts`,
//   `checkOverlap`, `isTcpOnly` and `probePeerAliveByID` (engine internals).
// * `registerLocalMemory`/`unregisterLocalMemory` always publish the segment
//   descriptor (`update_metadata = false` still publishes: peers see the change at
//   once rather than at the next publication).
// * `syncSegmentCache(name)` refreshes every cached descriptor, whatever `name`.
// * `getTransport(proto)` knows the transports installed through `installTransport`
//   on this object; one the engine installed itself at `init` (auto-discovery) is
//   reported as nullptr.
// * `MC_USE_TENT` / `MC_USE_TEV1` change nothing: one engine serves both APIs, and
//   `isUsingTent()` is false.
#ifndef MOONCAKE_RS_TRANSFER_ENGINE_H
#define MOONCAKE_RS_TRANSFER_ENGINE_H

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/base/status.h"
#include "memory_location.h"
#include "mooncake_ext.h"
#include "transfer_engine_c.h"
#include "transfer_metadata.h"
#include "transport/transport.h"

namespace mooncake {

using TransferRequest = Transport::TransferRequest;
using TransferStatus = Transport::TransferStatus;
using TransferStatusEnum = Transport::TransferStatusEnum;
using SegmentHandle = Transport::SegmentHandle;
using SegmentID = Transport::SegmentID;
using BatchID = Transport::BatchID;
const static BatchID INVALID_BATCH_ID = UINT64_MAX;
using BufferEntry = Transport::BufferEntry;
using NicLoadStats = Transport::NicLoadStats;

/// What a liveness probe found.
enum class PeerLiveness : uint8_t {
    Alive = 0,
    Unreachable = 1,
};

/// Transport auto-discovery: on or off (`protocol` is accepted and ignored: discovery
/// picks RDMA when a usable NIC exists, else TCP).
struct AutoDiscoverConfig {
    bool enabled = false;
    std::string protocol;
};

/// A Transfer Engine: moves bytes between registered memory of this process and of
/// peers' segments, in batches.
class TransferEngine {
   public:
    /// An engine that installs transports itself at `init` when `auto_discover`.
    TransferEngine(bool auto_discover = false) : auto_discover_(auto_discover) {}

    /// As above, discovering only the NICs in `filter` (empty: all).
    TransferEngine(bool auto_discover, const std::vector<std::string>& filter)
        : auto_discover_(auto_discover), filter_(filter) {}

    TransferEngine(TransferEngine&& other) noexcept { *this = std::move(other); }

    TransferEngine& operator=(TransferEngine&& other) noexcept {
        if (this != &other) {
            freeEngine();
            engine_ = std::exchange(other.engine_, nullptr);
            auto_discover_ = other.auto_discover_;
            filter_ = std::move(other.filter_);
            transports_ = std::move(other.transports_);
            metadata_ = std::move(other.metadata_);
        }
        return *this;
    }

    TransferEngine(const TransferEngine&) = delete;
    TransferEngine& operator=(const TransferEngine&) = delete;

    ~TransferEngine() { freeEngine(); }

    /// Starts the engine: its metadata connection (`P2PHANDSHAKE`, `http://...`,
    /// `etcd://...`, `redis://...`), its segment name, and the address and RPC port
    /// it advertises. Returns 0, or -1 (the reason is in `mooncake_last_error_message()`),
    /// also when already started.
    int init(const std::string& metadata_conn_string, const std::string& local_server_name,
             const std::string& ip_or_host_name = "", uint64_t rpc_port = 12345) {
        if (engine_) return ERR_INVALID_ARGUMENT_;
        if (filter_.empty()) {
            engine_ = createTransferEngine(metadata_conn_string.c_str(),
                                           local_server_name.c_str(), ip_or_host_name.c_str(),
                                           rpc_port, auto_discover_ ? 1 : 0);
        } else {
            std::string devices;
            for (const auto& f : filter_) devices += (devices.empty() ? "" : ",") + f;
            engine_ = mooncake_te_create(metadata_conn_string.c_str(), local_server_name.c_str(),
                                         devices.c_str(), auto_discover_ ? 1 : 0);
        }
        return engine_ ? 0 : ERR_INVALID_ARGUMENT_;
    }

    /// Stops the engine (its segment leaves the metadata store). Returns 0.
    int freeEngine() {
        transports_.clear();
        metadata_.reset();
        if (engine_) destroyTransferEngine(std::exchange(engine_, nullptr));
        return 0;
    }

    /// Installs `proto` ("tcp", "rdma"); `args[0]`, when given, is a NIC priority
    /// matrix (JSON). Returns the transport (the same one when already installed), or
    /// nullptr.
    Transport* installTransport(const std::string& proto, void** args) {
        if (!engine_ || !::installTransport(engine_, proto.c_str(), args)) return nullptr;
        auto& slot = transports_[proto];
        if (!slot) slot.reset(new Transport(proto));
        return slot.get();
    }

    /// Accepted; transports stay until the engine is freed (as upstream). Returns 0.
    int uninstallTransport(const std::string& proto) {
        return ::uninstallTransport(engine_, proto.c_str());
    }

    /// `ip:port` of this engine's RPC endpoint ("" before `init`).
    std::string getLocalIpAndPort() {
        char buf[256];
        if (!engine_ || ::getLocalIpAndPort(engine_, buf, sizeof buf) != 0) return std::string();
        return buf;
    }

    /// This engine's RPC port (-1 before `init`).
    int getRpcPort() {
        const std::string addr = getLocalIpAndPort();
        const auto colon = addr.rfind(':');
        if (colon == std::string::npos) return -1;
        try {
            return std::stoi(addr.substr(colon + 1));
        } catch (...) {
            return -1;
        }
    }

    /// Always false: one engine serves the classic and the TENT API.
    bool isUsingTent() const { return false; }

    /// Opens a peer's segment by name (this engine's own name: LOCAL_SEGMENT).
    /// Returns its handle, or `(SegmentHandle)-1`.
    SegmentHandle openSegment(const std::string& segment_name) {
        const segment_id_t id = ::openSegment(engine_, segment_name.c_str());
        return id < 0 ? static_cast<SegmentHandle>(-1) : static_cast<SegmentHandle>(id);
    }

    /// OK when `sid` is an open segment whose descriptor this engine holds.
    Status CheckSegmentStatus(SegmentID sid) {
        if (sid > static_cast<SegmentID>(INT32_MAX) ||
            mooncake_te_segment_buffer(engine_, static_cast<segment_id_t>(sid), 0, nullptr,
                                       nullptr) < 0)
            return Status::InvalidArgument("segment " + std::to_string(sid) + " is not open");
        return Status::OK();
    }

    /// Forgets an open segment. Returns 0, or a negative ERR_* code.
    int closeSegment(SegmentHandle handle) {
        if (handle > static_cast<SegmentHandle>(INT32_MAX)) return ERR_INVALID_ARGUMENT_;
        return ::closeSegment(engine_, static_cast<segment_id_t>(handle));
    }

    /// Removes a segment this engine published under `segment_name`.
    int removeLocalSegment(const std::string& segment_name) {
        return ::removeLocalSegment(engine_, segment_name.c_str());
    }

    /// Registers `[addr, addr + length)` so it can be moved from and to (and, when
    /// `remote_accessible`, reached by peers). Returns 0 or a negative ERR_* code
    /// (-1 zero length, -7 overlap).
    int registerLocalMemory(void* addr, size_t length,
                            const std::string& location = kWildcardLocation,
                            bool remote_accessible = true, bool update_metadata = true) {
        (void)update_metadata;
        return ::registerLocalMemory(engine_, addr, length, location.c_str(),
                                     remote_accessible ? 1 : 0);
    }

    /// Unregisters the region starting at `addr`. Returns 0 or a negative ERR_* code.
    int unregisterLocalMemory(void* addr, bool update_metadata = true) {
        (void)update_metadata;
        return ::unregisterLocalMemory(engine_, addr);
    }

    /// Registers several regions, publishing once.
    int registerLocalMemoryBatch(const std::vector<BufferEntry>& buffer_list,
                                 const std::string& location) {
        std::vector<buffer_entry_t> entries;
        entries.reserve(buffer_list.size());
        for (const auto& b : buffer_list) entries.push_back(buffer_entry_t{b.addr, b.length});
        return ::registerLocalMemoryBatch(engine_, entries.data(), entries.size(),
                                          location.c_str());
    }

    /// Unregisters several regions, publishing once.
    int unregisterLocalMemoryBatch(const std::vector<void*>& addr_list) {
        std::vector<void*> addrs(addr_list);
        return ::unregisterLocalMemoryBatch(engine_, addrs.data(), addrs.size());
    }

    /// A batch of up to `batch_size` tasks (INVALID_BATCH_ID on failure).
    BatchID allocateBatchID(size_t batch_size) { return ::allocateBatchID(engine_, batch_size); }

    /// Frees a batch whose tasks were all seen terminal (BatchBusy otherwise).
    Status freeBatchID(BatchID batch_id) {
        return status_of(::freeBatchID(engine_, batch_id), "freeBatchID");
    }

    /// Starts `entries` as the batch's next tasks.
    Status submitTransfer(BatchID batch_id, const std::vector<TransferRequest>& entries) {
        std::vector<transfer_request_t> requests;
        Status s = to_c(entries, requests);
        if (!s.ok()) return s;
        return status_of(::submitTransfer(engine_, batch_id, requests.data(), requests.size()),
                         "submitTransfer");
    }

    /// Starts `entries`; once they all completed, `notify_msg` is sent to the target.
    Status submitTransferWithNotify(BatchID batch_id,
                                    const std::vector<TransferRequest>& entries,
                                    TransferMetadata::NotifyDesc notify_msg) {
        std::vector<transfer_request_t> requests;
        Status s = to_c(entries, requests);
        if (!s.ok()) return s;
        notify_msg_t msg{notify_msg.name.data(), notify_msg.notify_msg.data()};
        return status_of(::submitTransferWithNotify(engine_, batch_id, requests.data(),
                                                    requests.size(), msg),
                         "submitTransferWithNotify");
    }

    /// Moves the notifications received since the last call to the end of `notifies`.
    /// Returns 0, or -1 before `init`.
    int getNotifies(std::vector<TransferMetadata::NotifyDesc>& notifies) {
        if (!engine_) return ERR_INVALID_ARGUMENT_;
        int size = 0;
        notify_msg_t* msgs = getNotifsFromEngine(engine_, &size);
        if (!msgs) return 0;
        for (int i = 0; i < size; i++)
            notifies.push_back({msgs[i].name ? msgs[i].name : "", msgs[i].msg ? msgs[i].msg : ""});
        freeNotifsMsgBuf(msgs, size);
        return 0;
    }

    /// Sends a notification to the open segment `target_id`.
    int sendNotifyByID(SegmentID target_id, TransferMetadata::NotifyDesc notify_msg) {
        notify_msg_t msg{notify_msg.name.data(), notify_msg.notify_msg.data()};
        return genNotifyInEngine(engine_, target_id, msg);
    }

    /// Sends a notification to the segment named `remote_agent` (opening it).
    int sendNotifyByName(std::string remote_agent, TransferMetadata::NotifyDesc notify_msg) {
        const SegmentHandle id = openSegment(remote_agent);
        if (id == static_cast<SegmentHandle>(-1)) return ERR_METADATA_;
        return sendNotifyByID(id, std::move(notify_msg));
    }

    /// The state of task `task_id` of the batch.
    Status getTransferStatus(BatchID batch_id, size_t task_id, TransferStatus& status) {
        transfer_status_t s{};
        const int ret = ::getTransferStatus(engine_, batch_id, task_id, &s);
        if (ret != 0) return status_of(ret, "getTransferStatus");
        status.s = static_cast<TransferStatusEnum>(s.status);
        status.transferred_bytes = static_cast<size_t>(s.transferred_bytes);
        return Status::OK();
    }

    /// The whole batch: COMPLETED when every task completed, FAILED when one failed,
    /// else WAITING; the bytes of the completed tasks.
    Status getBatchTransferStatus(BatchID batch_id, TransferStatus& status) {
        transfer_status_t s{};
        if (mooncake_te_batch_status(engine_, batch_id, &s) != 0)
            return Status::InvalidArgument("getBatchTransferStatus: unknown batch " +
                                           std::to_string(batch_id) + last_error());
        status.s = static_cast<TransferStatusEnum>(s.status);
        status.transferred_bytes = static_cast<size_t>(s.transferred_bytes);
        return Status::OK();
    }

    /// Per-RDMA-NIC load (empty without RDMA).
    Status getNicLoadStats(std::vector<NicLoadStats>& stats) const {
        std::vector<nic_load_stat_t> raw(64);
        size_t count = raw.size();
        if (::getNicLoadStats(engine_, raw.data(), &count) != 0)
            return Status::InvalidArgument("getNicLoadStats" + last_error());
        if (count > raw.size()) {  // more NICs than room: ask again with room for all
            raw.resize(count);
            if (::getNicLoadStats(engine_, raw.data(), &count) != 0)
                return Status::InvalidArgument("getNicLoadStats" + last_error());
        }
        stats.clear();
        for (size_t i = 0; i < count && i < raw.size(); i++)
            stats.push_back({raw[i].device_name, raw[i].inflight_bytes, raw[i].ewma_bandwidth_bps});
        return Status::OK();
    }

    /// The transport `proto` installed through `installTransport`, or nullptr.
    Transport* getTransport(const std::string& proto) {
        const auto it = transports_.find(proto);
        return it == transports_.end() ? nullptr : it->second.get();
    }

    /// Re-reads every cached segment descriptor from the metadata store.
    int syncSegmentCache(const std::string& segment_name = "") {
        (void)segment_name;
        return ::syncSegmentCache(engine_);
    }

    /// The engine's view of segment descriptors (nullptr before `init`).
    std::shared_ptr<TransferMetadata> getMetadata() {
        if (!engine_) return nullptr;
        if (!metadata_) metadata_.reset(new TransferMetadata(engine_));
        return metadata_;
    }

    /// Sets auto-discovery for the next `init`.
    void setAutoDiscover(bool auto_discover) { auto_discover_ = auto_discover; }
    void setAutoDiscover(const AutoDiscoverConfig& config) { auto_discover_ = config.enabled; }

    /// Limits discovery at the next `init` to these NICs.
    void setWhitelistFilters(std::vector<std::string>&& filters) { filter_ = std::move(filters); }

    /// On SIGINT/SIGTERM every live engine is freed (its metadata removed) before exit.
    void enableGracefulShutdown() { ::enableGracefulShutdown(engine_); }

    /// The engine's NICs and topology, as text or JSON.
    std::string showLinks(bool json = false) const {
        std::string buf(64 << 10, '\0');
        if (::showLinks(engine_, buf.data(), buf.size(), json ? 1 : 0) != 0) return std::string();
        buf.resize(buf.find('\0'));
        return buf;
    }

   private:
    static constexpr int ERR_INVALID_ARGUMENT_ = -1;
    static constexpr int ERR_METADATA_ = -200;

    static std::string last_error() {
        const char* m = mooncake_last_error_message();
        return (m && *m) ? std::string(": ") + m : std::string();
    }

    /// 0 as OK; a negative ERR_* code as the Status of the same magnitude.
    static Status status_of(int ret, const char* what) {
        if (ret == 0) return Status::OK();
        const int magnitude = ret < 0 ? -ret : ret;
        Status::Code code = Status::Code::kInvalidArgument;
        switch (magnitude) {
            case 1: case 2: case 3: case 4: case 6: case 7: case 8: case 101: case 102:
            case 103: case 104: case 200: case 201: case 202: case 300: case 301: case 302:
            case 999:
                code = static_cast<Status::Code>(magnitude);
                break;
            default:
                break;
        }
        return Status(code, std::string(what) + " returned " + std::to_string(ret) + last_error());
    }

    static Status to_c(const std::vector<TransferRequest>& entries,
                       std::vector<transfer_request_t>& out) {
        out.reserve(entries.size());
        for (const auto& e : entries) {
            if (e.target_id > static_cast<SegmentID>(INT32_MAX))
                return Status::InvalidArgument("segment handle " + std::to_string(e.target_id) +
                                               " was not returned by openSegment");
            out.push_back(transfer_request_t{
                e.opcode == TransferRequest::WRITE ? OPCODE_WRITE : OPCODE_READ, e.source,
                static_cast<segment_id_t>(e.target_id), e.target_offset,
                static_cast<uint64_t>(e.length)});
        }
        return Status::OK();
    }

    transfer_engine_t engine_ = nullptr;
    bool auto_discover_ = false;
    std::vector<std::string> filter_;
    std::map<std::string, std::unique_ptr<Transport>> transports_;
    std::shared_ptr<TransferMetadata> metadata_;
};

}  // namespace mooncake

#endif  // MOONCAKE_RS_TRANSFER_ENGINE_H
