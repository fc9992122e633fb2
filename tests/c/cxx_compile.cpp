// The headers compile as C++ (extern "C" linkage, no C-only constructs) and the API is
// callable from C++: an engine, memory, a batch against its own segment, notifies.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <vector>

#include "mooncake/mooncake_ext.h"
#include "mooncake/transfer_engine_c.h"

static_assert(sizeof(transfer_request_t) == 40, "transfer_request_t");
static_assert(sizeof(transfer_status_t) == 16, "transfer_status_t");
static_assert(sizeof(buffer_entry_t) == 16, "buffer_entry_t");
static_assert(sizeof(notify_msg_t) == 16, "notify_msg_t");
static_assert(sizeof(nic_load_stat_t) == 80, "nic_load_stat_t");
static_assert(std::is_same<segment_id_t, int32_t>::value, "segment_id_t");
static_assert(std::is_same<batch_id_t, uint64_t>::value, "batch_id_t");
static_assert(std::is_same<decltype(&submitTransfer),
                           int (*)(transfer_engine_t, uint64_t, transfer_request *, size_t)>::value,
              "submitTransfer");
static_assert(INVALID_BATCH == UINT64_MAX, "INVALID_BATCH");

static int failed = 0, passed = 0;
#define EXPECT(cond)                                                                         \
    do {                                                                                     \
        if (cond) {                                                                          \
            passed++;                                                                        \
        } else {                                                                             \
            failed++;                                                                        \
            std::fprintf(stderr, "%s:%d: %s (last error: \"%s\")\n", __FILE__, __LINE__, #cond, \
                         mooncake_last_error_message());                                     \
        }                                                                                    \
    } while (0)

int main() {
    transfer_engine_t e = createTransferEngine("P2PHANDSHAKE", "127.0.0.1", nullptr, 0, 1);
    EXPECT(e != nullptr);
    if (e == nullptr) return 1;
    std::vector<unsigned char> region(1 << 16), src(4096, 0x7E);
    EXPECT(registerLocalMemory(e, region.data(), region.size(), "cpu:0", 1) == 0);
    batch_id_t b = allocateBatchID(e, 1);
    EXPECT(b != INVALID_BATCH);
    transfer_request_t r{};
    r.opcode = OPCODE_WRITE;
    r.source = src.data();
    r.target_id = LOCAL_SEGMENT;
    r.target_offset = reinterpret_cast<uint64_t>(region.data());
    r.length = src.size();
    EXPECT(submitTransfer(e, b, &r, 1) == 0);
    // Generous deadlines: only reached when something is broken.
    auto deadline = [] { return std::chrono::steady_clock::now() + std::chrono::seconds(60); };
    transfer_status_t st{};
    for (auto until = deadline(); std::chrono::steady_clock::now() < until;) {
        if (getTransferStatus(e, b, 0, &st) != 0) break;
        if (st.status == STATUS_COMPLETED || st.status == STATUS_FAILED) break;
    }
    EXPECT(st.status == STATUS_COMPLETED);
    EXPECT(std::memcmp(region.data(), src.data(), src.size()) == 0);
    EXPECT(freeBatchID(e, b) == 0);
    EXPECT(freeBatchID(e, b) == 1);
    EXPECT(std::strcmp(mooncake_last_error_function(), "freeBatchID") == 0);

    char name[] = "cxx", msg[] = "hi";
    EXPECT(genNotifyInEngine(e, LOCAL_SEGMENT, notify_msg_t{name, msg}) == 0);
    int size = 0;
    notify_msg_t *got = nullptr;
    for (auto until = deadline(); got == nullptr && std::chrono::steady_clock::now() < until;)
        got = getNotifsFromEngine(e, &size);
    EXPECT(got != nullptr && size == 1 && std::strcmp(got[0].msg, "hi") == 0);
    EXPECT(freeNotifsMsgBuf(got, size) == 0);

    char links[128];
    EXPECT(showLinks(e, links, sizeof links, 1) == 0);
    EXPECT(unregisterLocalMemory(e, region.data()) == 0);
    destroyTransferEngine(e);
    EXPECT(discoverTopology(e) == -1);
    std::printf("cxx_compile (mooncake %s): %d passed, %d failed\n", mooncake_version(), passed,
                failed);
    return failed == 0 ? 0 : 1;
}
