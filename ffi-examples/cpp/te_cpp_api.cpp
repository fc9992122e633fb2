// Upstream's C++ Transfer Engine API (mooncake::TransferEngine, "transfer_engine.h"),
// as a program written for upstream's header uses it, against libmooncake: two engines
// on loopback (P2PHANDSHAKE), transports, registration (single, batch, errors), a
// peer's buffers from getMetadata(), WRITE and READ batches with per-task and batch
// status, notifications (with a batch and by name), the errors upstream reports for
// bad input, and moving and freeing an engine. Every byte moved is checked.
//
// Same host by default; MC_DISABLE_SAME_HOST=1 makes the engines talk over TCP.
//
//   c++ -std=c++17 te_cpp_api.cpp $(pkg-config --cflags --libs mooncake) -o te_cpp_api
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "transfer_engine.h"

using mooncake::BatchID;
using mooncake::BufferEntry;
using mooncake::SegmentHandle;
using mooncake::Status;
using mooncake::TransferEngine;
using mooncake::TransferMetadata;
using mooncake::TransferRequest;
using mooncake::TransferStatus;
using mooncake::TransferStatusEnum;
using mooncake::Transport;

namespace {

const auto kDeadline = std::chrono::seconds(30);

void check(bool ok, const std::string &what) {
    if (!ok) throw std::runtime_error(what);
}

void check_ok(const Status &s, const std::string &what) {
    if (!s.ok()) throw std::runtime_error(what + ": " + s.ToString());
}

// Polls the batch until every task is terminal; returns the batch's status.
TransferStatus wait_batch(TransferEngine &engine, BatchID batch) {
    const auto until = std::chrono::steady_clock::now() + kDeadline;
    TransferStatus status{};
    for (;;) {
        check_ok(engine.getBatchTransferStatus(batch, status), "getBatchTransferStatus");
        if (status.s == TransferStatusEnum::COMPLETED || status.s == TransferStatusEnum::FAILED)
            return status;
        check(std::chrono::steady_clock::now() < until, "batch did not finish in time");
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

// Polls until a notification `name`/`msg` reached `engine`.
void wait_notify(TransferEngine &engine, const std::string &name, const std::string &msg) {
    const auto until = std::chrono::steady_clock::now() + kDeadline;
    std::vector<TransferMetadata::NotifyDesc> got;
    for (;;) {
        check(engine.getNotifies(got) == 0, "getNotifies");
        for (const auto &n : got)
            if (n.name == name && n.notify_msg == msg) return;
        check(std::chrono::steady_clock::now() < until, "notification " + name + " never came");
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

TransferRequest request(TransferRequest::OpCode op, void *local, SegmentHandle target,
                        uint64_t remote, size_t len) {
    TransferRequest r;
    r.opcode = op;
    r.source = local;
    r.target_id = target;
    r.target_offset = remote;
    r.length = len;
    return r;
}

void start(TransferEngine &engine, const char *what) {
    check(engine.init("P2PHANDSHAKE", "127.0.0.1", "127.0.0.1", 0) == 0,
          std::string(what) + ": init");
    Transport *tcp = engine.installTransport("tcp", nullptr);
    check(tcp != nullptr, std::string(what) + ": installTransport(tcp)");
    check(std::string(tcp->getName()) == "tcp", "transport name");
    check(engine.installTransport("tcp", nullptr) == tcp, "installing twice gives the same");
    check(engine.getTransport("tcp") == tcp, "getTransport");
    check(engine.getTransport("rdma") == nullptr, "getTransport of a protocol not installed");
    const std::string addr = engine.getLocalIpAndPort();
    check(!addr.empty() && engine.getRpcPort() > 0 &&
              addr.substr(addr.rfind(':') + 1) == std::to_string(engine.getRpcPort()),
          "getLocalIpAndPort/getRpcPort: " + addr);
}

}  // namespace

int main() try {
    const size_t len = 1 << 20;
    std::vector<unsigned char> remote(len), local(len), back(len), extra(8192);
    for (size_t i = 0; i < len; i++) local[i] = static_cast<unsigned char>(i * 7 + (i >> 9));

    TransferEngine target(false), initiator(false);
    check(!target.isUsingTent(), "isUsingTent");
    check(target.getLocalIpAndPort().empty(), "an engine not started has no address");
    start(target, "target");
    start(initiator, "initiator");
    check(target.init("P2PHANDSHAKE", "127.0.0.1") != 0, "a second init is refused");

    // Registration, its errors, and the batch form.
    check(target.registerLocalMemory(remote.data(), len, mooncake::kWildcardLocation, true) == 0,
          "register target buffer");
    check(initiator.registerLocalMemory(local.data(), len) == 0, "register local");
    check(initiator.registerLocalMemory(back.data(), len, "*", true, false) == 0, "register back");
    check(initiator.registerLocalMemory(extra.data(), 0) == -1, "zero length is -1");
    check(initiator.registerLocalMemory(local.data() + 16, 64) == -7, "overlap is -7");
    check(initiator.registerLocalMemoryBatch(
              {BufferEntry{extra.data(), 4096}, BufferEntry{extra.data() + 4096, 4096}}, "*") == 0,
          "registerLocalMemoryBatch");
    check(initiator.unregisterLocalMemoryBatch({extra.data(), extra.data() + 4096}) == 0,
          "unregisterLocalMemoryBatch");

    // The peer's segment, and its buffer as a program finds it.
    const std::string target_name = target.getLocalIpAndPort();
    SegmentHandle seg = initiator.openSegment(target_name);
    check(seg != static_cast<SegmentHandle>(-1), "openSegment(" + target_name + ")");
    check_ok(initiator.CheckSegmentStatus(seg), "CheckSegmentStatus");
    check(!initiator.CheckSegmentStatus(777).ok(), "CheckSegmentStatus of a segment not open");
    auto desc = initiator.getMetadata()->getSegmentDescByID(seg);
    check(desc != nullptr, "getSegmentDescByID");
    uint64_t remote_base = 0;
    for (const auto &b : desc->buffers)
        if (b.addr == reinterpret_cast<uintptr_t>(remote.data()) && b.length == len)
            remote_base = b.addr;
    check(remote_base != 0, "the target's buffer is in its descriptor");
    auto by_name = initiator.getMetadata()->getSegmentDescByName(target_name, true);
    check(by_name && by_name->name == target_name &&
              by_name->buffers.size() == desc->buffers.size(),
          "getSegmentDescByName");

    // WRITE, then READ back in two halves; per-task and batch status.
    BatchID batch = initiator.allocateBatchID(4);
    check(batch != mooncake::INVALID_BATCH_ID, "allocateBatchID");
    check_ok(initiator.submitTransfer(
                 batch, {request(TransferRequest::WRITE, local.data(), seg, remote_base, len)}),
             "submitTransfer WRITE");
    TransferStatus st = wait_batch(initiator, batch);
    check(st.s == TransferStatusEnum::COMPLETED && st.transferred_bytes == len, "WRITE completed");
    check_ok(initiator.getTransferStatus(batch, 0, st), "getTransferStatus");
    check(st.s == TransferStatusEnum::COMPLETED, "task 0 completed");
    check(std::memcmp(remote.data(), local.data(), len) == 0, "WRITE: bytes differ");
    check_ok(initiator.freeBatchID(batch), "freeBatchID");

    batch = initiator.allocateBatchID(2);
    check_ok(initiator.submitTransfer(
                 batch,
                 {request(TransferRequest::READ, back.data(), seg, remote_base, len / 2),
                  request(TransferRequest::READ, back.data() + len / 2, seg,
                          remote_base + len / 2, len / 2)}),
             "submitTransfer READ");
    st = wait_batch(initiator, batch);
    check(st.s == TransferStatusEnum::COMPLETED && st.transferred_bytes == len, "READ completed");
    check(back == local, "READ: bytes differ");
    check_ok(initiator.freeBatchID(batch), "freeBatchID");

    // Notifications: after a batch, and by name.
    std::memset(remote.data(), 0, len);
    batch = initiator.allocateBatchID(1);
    check_ok(initiator.submitTransferWithNotify(
                 batch, {request(TransferRequest::WRITE, local.data(), seg, remote_base, len)},
                 TransferMetadata::NotifyDesc{"cpp-api", "batch done"}),
             "submitTransferWithNotify");
    check(wait_batch(initiator, batch).s == TransferStatusEnum::COMPLETED, "notify batch");
    wait_notify(target, "cpp-api", "batch done");
    check(std::memcmp(remote.data(), local.data(), len) == 0, "notified WRITE: bytes differ");
    check_ok(initiator.freeBatchID(batch), "freeBatchID");
    check(initiator.sendNotifyByName(target_name, {"by-name", "hello"}) == 0, "sendNotifyByName");
    wait_notify(target, "by-name", "hello");
    check(initiator.sendNotifyByID(seg, {"by-id", "hi"}) == 0, "sendNotifyByID");
    wait_notify(target, "by-id", "hi");

    // Errors as upstream reports them.
    const BatchID unknown = 0x5eed;
    TransferStatus ignored{};
    check(!initiator.getTransferStatus(unknown, 0, ignored).ok(), "status of an unknown batch");
    check(!initiator.getBatchTransferStatus(unknown, ignored).ok(), "batch status, unknown");
    check(!initiator.freeBatchID(unknown).ok(), "freeing an unknown batch");
    check(!initiator.submitTransfer(unknown, {}).ok() ||
              !initiator.submitTransfer(unknown,
                                        {request(TransferRequest::WRITE, local.data(), seg,
                                                 remote_base, 64)})
                   .ok(),
          "submitting to an unknown batch");
    batch = initiator.allocateBatchID(1);
    const Status too_many = initiator.submitTransfer(
        batch, {request(TransferRequest::WRITE, local.data(), seg, remote_base, 64),
                request(TransferRequest::WRITE, local.data(), seg, remote_base, 64)});
    check(!too_many.ok(), "more tasks than the batch holds");
    check(initiator.submitTransfer(batch, {request(TransferRequest::WRITE, local.data(),
                                                   SegmentHandle{1} << 40, remote_base, 64)})
              .IsInvalidArgument(),
          "a handle openSegment never returned");
    check_ok(initiator.freeBatchID(batch), "freeBatchID after refusals");
    check(initiator.openSegment("") == static_cast<SegmentHandle>(-1), "openSegment(\"\")");
    check(initiator.closeSegment(SegmentHandle{1} << 40) < 0, "closeSegment of a bad handle");
    check(initiator.unregisterLocalMemory(extra.data()) < 0, "unregistering unknown memory");

    // Moving an engine keeps it working; a freed engine refuses calls without crashing.
    TransferEngine moved(std::move(initiator));
    check(moved.openSegment(target_name) == seg, "the moved engine keeps its segments");
    check(initiator.getLocalIpAndPort().empty(), "a moved-from engine is empty");
    check(moved.unregisterLocalMemory(local.data()) == 0, "unregister local");
    check(moved.unregisterLocalMemory(back.data()) == 0, "unregister back");
    check(moved.freeEngine() == 0 && moved.getLocalIpAndPort().empty(), "freeEngine");
    check(moved.allocateBatchID(1) == mooncake::INVALID_BATCH_ID, "a freed engine refuses");
    check(moved.getMetadata() == nullptr, "a freed engine has no metadata");

    std::printf("te_cpp_api: %s, %zu bytes written, read back and notified: OK\n",
                std::getenv("MC_DISABLE_SAME_HOST") ? "tcp" : "same host", len);
    return 0;
} catch (const std::exception &e) {
    std::fprintf(stderr, "te_cpp_api: %s (last error: %s)\n", e.what(),
                 mooncake_last_error_message());
    return 1;
}
