// A small header-only RAII wrapper over the Transfer Engine C API (transfer_engine_c.h)
// for C++17. Every handle is owned by exactly one object and released in its
// destructor; failures throw mooncake::Error with the library's last-error message.
//
//   mooncake::Engine engine("P2PHANDSHAKE", "127.0.0.1");
//   mooncake::Registration reg(engine, buf.data(), buf.size());
//   auto seg = engine.open_segment(peer_name);
//   mooncake::Batch(engine, 1).submit({mooncake::write(buf.data(), seg, addr, len)}).wait();
#ifndef MOONCAKE_HPP
#define MOONCAKE_HPP

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <mooncake/mooncake_ext.h>  // also includes transfer_engine_c.h and store_c.h

namespace mooncake {

struct Error : std::runtime_error {
    explicit Error(const std::string &what)
        : std::runtime_error(what + ": " + mooncake_last_error_message()) {}
};

// An engine (createTransferEngine / destroyTransferEngine). Move-only.
class Engine {
  public:
    explicit Engine(const std::string &metadata, const std::string &local_name = "127.0.0.1",
                    bool auto_discover = true)
        : h_(createTransferEngine(metadata.c_str(), local_name.c_str(), local_name.c_str(), 0,
                                  auto_discover ? 1 : 0)) {
        if (!h_) throw Error("createTransferEngine");
    }
    Engine(Engine &&o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
    Engine &operator=(Engine &&o) noexcept {
        if (this != &o) {
            reset();
            h_ = std::exchange(o.h_, nullptr);
        }
        return *this;
    }
    Engine(const Engine &) = delete;
    Engine &operator=(const Engine &) = delete;
    ~Engine() { reset(); }

    transfer_engine_t get() const { return h_; }

    // The segment name peers open this engine by ("ip:port" in P2PHANDSHAKE mode).
    std::string segment_name() const {
        char buf[256];
        if (getLocalIpAndPort(h_, buf, sizeof buf) != 0) throw Error("getLocalIpAndPort");
        return buf;
    }
    segment_id_t open_segment(const std::string &name) const {
        segment_id_t id = openSegment(h_, name.c_str());
        if (id < 0) throw Error("openSegment(" + name + ")");
        return id;
    }

  private:
    void reset() {
        if (h_) destroyTransferEngine(std::exchange(h_, nullptr));
    }
    transfer_engine_t h_;
};

// Memory registered with an engine for its lifetime (registerLocalMemory /
// unregisterLocalMemory). Must not outlive the engine.
class Registration {
  public:
    Registration(const Engine &engine, void *addr, size_t len, const std::string &location = "cpu:0")
        : engine_(engine.get()), addr_(addr) {
        if (registerLocalMemory(engine_, addr, len, location.c_str(), 1) != 0)
            throw Error("registerLocalMemory");
    }
    Registration(Registration &&o) noexcept
        : engine_(o.engine_), addr_(std::exchange(o.addr_, nullptr)) {}
    Registration(const Registration &) = delete;
    Registration &operator=(const Registration &) = delete;
    Registration &operator=(Registration &&) = delete;
    ~Registration() {
        if (addr_) unregisterLocalMemory(engine_, addr_);
    }

  private:
    transfer_engine_t engine_;
    void *addr_;
};

inline transfer_request_t request(int opcode, void *local, segment_id_t target,
                                  uint64_t remote_addr, uint64_t len) {
    transfer_request_t r{};
    r.opcode = opcode;
    r.source = local;
    r.target_id = target;
    r.target_offset = remote_addr;
    r.length = len;
    return r;
}
inline transfer_request_t write(void *local, segment_id_t target, uint64_t remote_addr, uint64_t len) {
    return request(OPCODE_WRITE, local, target, remote_addr, len);
}
inline transfer_request_t read(void *local, segment_id_t target, uint64_t remote_addr, uint64_t len) {
    return request(OPCODE_READ, local, target, remote_addr, len);
}

// A batch (allocateBatchID / freeBatchID). Must not outlive the engine. wait()
// observes every task, so the destructor's freeBatchID succeeds; a batch destroyed
// with tasks still in flight is waited for first.
class Batch {
  public:
    Batch(const Engine &engine, size_t capacity) : engine_(engine.get()) {
        id_ = allocateBatchID(engine_, capacity);
        if (id_ == INVALID_BATCH) throw Error("allocateBatchID");
    }
    Batch(const Batch &) = delete;
    Batch &operator=(const Batch &) = delete;
    ~Batch() {
        if (submitted_ > 0) {
            try {
                wait();
            } catch (...) {
            }
        }
        freeBatchID(engine_, id_);
    }

    Batch &submit(std::vector<transfer_request_t> reqs) {
        int rc = submitTransfer(engine_, id_, reqs.data(), reqs.size());
        if (rc != 0) throw Error("submitTransfer (code " + std::to_string(rc) + ")");
        submitted_ += reqs.size();
        return *this;
    }

    // Polls until every submitted task completed; throws when one failed or on timeout.
    void wait(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
        auto deadline = std::chrono::steady_clock::now() + timeout;
        for (size_t i = 0; i < submitted_; i++) {
            transfer_status_t st{};
            for (;;) {
                if (getTransferStatus(engine_, id_, i, &st) != 0) throw Error("getTransferStatus");
                if (st.status == STATUS_COMPLETED) break;
                if (st.status == STATUS_FAILED) throw Error("task " + std::to_string(i) + " failed");
                if (std::chrono::steady_clock::now() > deadline) throw Error("timed out");
                std::this_thread::sleep_for(std::chrono::microseconds(100));
            }
        }
    }

  private:
    transfer_engine_t engine_;
    batch_id_t id_;
    size_t submitted_ = 0;
};

}  // namespace mooncake

#endif  // MOONCAKE_HPP
