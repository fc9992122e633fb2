/* Every function of transfer_engine_c.h on one engine (and a destroyed one): return
 * values on success and on every error path, and the mooncake_ext.h last error. */
#include "test_common.h"

#include <errno.h>

#define BOGUS_HANDLE ((transfer_engine_t)(uintptr_t)0x12345678u)

static int last_error_is(const char *function) {
    return strcmp(mooncake_last_error_function(), function) == 0 &&
           strncmp(mooncake_last_error_message(), function, strlen(function)) == 0;
}

static void test_create(void) {
    CHECK(createTransferEngine(NULL, "127.0.0.1", NULL, 0, 0) == NULL);
    CHECK(last_error_is("createTransferEngine"));
    CHECK(strstr(mooncake_last_error_message(), "metadata_conn_string") != NULL);
    CHECK_EQ(mooncake_last_error_errno(), EINVAL);
    CHECK(createTransferEngine("P2PHANDSHAKE", NULL, NULL, 0, 0) == NULL);
    /* Nothing listens on port 1: the metadata write fails, with the backend named. */
    CHECK(createTransferEngine("etcd://127.0.0.1:1", "127.0.0.1", NULL, 0, 0) == NULL);
    CHECK(strstr(mooncake_last_error_message(), "etcd") != NULL);
    CHECK(createTransferEngine("redis://127.0.0.1:1", "127.0.0.1", NULL, 0, 0) == NULL);
    CHECK(strstr(mooncake_last_error_message(), "redis") != NULL);
    CHECK(createTransferEngine("127.0.0.1:2379", "127.0.0.1", NULL, 0, 0) == NULL);
    CHECK(createTransferEngine("zookeeper://h:1", "node", NULL, 0, 0) == NULL);
    CHECK(createTransferEngine("P2PHANDSHAKE", "", NULL, 0, 0) == NULL);
    mooncake_clear_last_error();
    CHECK_EQ(strlen(mooncake_last_error_message()), 0);
    CHECK_EQ(strlen(mooncake_last_error_function()), 0);
    CHECK_EQ(mooncake_last_error_errno(), 0);
}

static void test_identity(transfer_engine_t e) {
    char buf[128];
    memset(buf, 'x', sizeof buf);
    CHECK_EQ(getLocalIpAndPort(e, buf, sizeof buf), 0);
    CHECK_EQ(strlen(mooncake_last_error_message()), 0); /* success clears */
    CHECK(strncmp(buf, "127.0.0.1:", 10) == 0);
    int port = atoi(buf + 10);
    CHECK(port >= 15000 && port <= 17000);
    size_t full = strlen(buf);

    char small[8];
    memset(small, 'x', sizeof small);
    CHECK_EQ(getLocalIpAndPort(e, small, 5), 0);
    CHECK(memcmp(small, "127.", 4) == 0 && small[4] == '\0' && small[5] == 'x');
    memset(small, 'x', sizeof small);
    CHECK_EQ(getLocalIpAndPort(e, small, 0), 0);
    CHECK(small[0] == 'x');
    CHECK_EQ(getLocalIpAndPort(e, small, 1), 0);
    CHECK(small[0] == '\0' && small[1] == 'x');
    char exact[64];
    CHECK_EQ(getLocalIpAndPort(e, exact, full + 1), 0);
    CHECK(strcmp(exact, buf) == 0);
    CHECK_EQ(getLocalIpAndPort(e, NULL, 16), -1);
    CHECK(last_error_is("getLocalIpAndPort"));
    CHECK_EQ(getLocalIpAndPort(NULL, buf, sizeof buf), -1);
    CHECK_EQ(mooncake_last_error_errno(), EBADF);
    CHECK_EQ(getLocalIpAndPort(BOGUS_HANDLE, buf, sizeof buf), -1);
    CHECK(strstr(mooncake_last_error_message(), "not a live engine") != NULL);

    CHECK_EQ(discoverTopology(e), 0);
    CHECK_EQ(discoverTopology(NULL), -1);
    CHECK_EQ(discoverTopology(BOGUS_HANDLE), -1);

    char links[256];
    CHECK_EQ(showLinks(e, links, sizeof links, 1), 0);
    CHECK(strcmp(links, "{\"local_nics\":[],\"topology\":{}}") == 0);
    CHECK_EQ(showLinks(e, links, sizeof links, 0), 0);
    CHECK(strlen(links) > 0);
    memset(links, 'x', sizeof links);
    CHECK_EQ(showLinks(e, links, 4, 1), 0);
    CHECK(memcmp(links, "{\"l", 3) == 0 && links[3] == '\0' && links[4] == 'x');
    CHECK_EQ(showLinks(NULL, links, sizeof links, 1), -1);
    CHECK_EQ(showLinks(BOGUS_HANDLE, links, sizeof links, 1), -1);
    CHECK_EQ(showLinks(e, NULL, sizeof links, 1), -1);
    CHECK_EQ(showLinks(e, links, 0, 1), -1);

    nic_load_stat_t stats[4];
    size_t count = 99;
    CHECK_EQ(getNicLoadStats(e, stats, &count), 0);
    CHECK_EQ(count, 0);
    CHECK_EQ(getNicLoadStats(NULL, stats, &count), -1);
    CHECK_EQ(getNicLoadStats(BOGUS_HANDLE, stats, &count), -1);
    CHECK_EQ(getNicLoadStats(e, NULL, &count), -1);
    CHECK_EQ(getNicLoadStats(e, stats, NULL), -1);
}

static void test_transports(transfer_engine_t e) {
    /* Hosts without an RDMA NIC refuse, with the reason; hosts with one install it. */
    if (installTransport(e, "rdma", NULL) == NULL) {
        CHECK(last_error_is("installTransport"));
    }
    CHECK(installTransport(e, "nvmeof", NULL) == NULL);
    CHECK(installTransport(e, "bogus", NULL) == NULL);
    CHECK(installTransport(e, NULL, NULL) == NULL);
    CHECK(installTransport(NULL, "tcp", NULL) == NULL);
    CHECK(installTransport(BOGUS_HANDLE, "tcp", NULL) == NULL);
    char bad_json[] = "{not json";
    void *bad_args[2] = {bad_json, NULL};
    CHECK(installTransport(e, "tcp", bad_args) == NULL);
    CHECK(strstr(mooncake_last_error_message(), "JSON") != NULL);

    char topology[] = "{\"cpu:0\": [[], []]}";
    void *args[2] = {topology, NULL};
    transport_t t = installTransport(e, "tcp", args);
    CHECK(t != NULL);
    CHECK(installTransport(e, "tcp", NULL) == t); /* already installed: same one */
    void *empty_args[1] = {NULL};
    CHECK(installTransport(e, "tcp", empty_args) == t);

    CHECK_EQ(uninstallTransport(e, "tcp"), 0);
    CHECK_EQ(uninstallTransport(e, NULL), 0);
    CHECK_EQ(uninstallTransport(NULL, "tcp"), -1);
    CHECK_EQ(uninstallTransport(BOGUS_HANDLE, "tcp"), -1);
}

static void test_segments(transfer_engine_t e) {
    char name[128], slashed[160];
    segment_name(e, name, sizeof name);
    snprintf(slashed, sizeof slashed, "//%s", name);
    CHECK_EQ(openSegment(e, name), LOCAL_SEGMENT);
    CHECK_EQ(openSegment(e, slashed), LOCAL_SEGMENT);
    CHECK_EQ(openSegmentNoCache(e, name), LOCAL_SEGMENT);
    CHECK_EQ(openSegment(e, ""), -1);
    CHECK(last_error_is("openSegment"));
    CHECK_EQ(openSegment(e, "///"), -1);
    CHECK_EQ(openSegment(e, NULL), -1);
    CHECK_EQ(openSegment(NULL, name), -1);
    CHECK_EQ(openSegment(BOGUS_HANDLE, name), -1);
    /* Nothing listens on port 1: the descriptor fetch fails. */
    CHECK_EQ(openSegment(e, "127.0.0.1:1"), -1);
    CHECK_EQ(openSegmentNoCache(e, "127.0.0.1:1"), -1);
    CHECK_EQ(openSegmentNoCache(e, NULL), -1);
    CHECK_EQ(openSegmentNoCache(NULL, name), -1);

    CHECK_EQ(closeSegment(e, 1), 0);
    CHECK_EQ(closeSegment(e, -5), 0);
    CHECK_EQ(closeSegment(NULL, 1), -1);
    CHECK_EQ(closeSegment(BOGUS_HANDLE, 1), -1);

    CHECK_EQ(warmupEfaSegment(e, name), 0);
    CHECK_EQ(warmupEfaSegment(e, NULL), 0);
    CHECK_EQ(warmupEfaSegment(NULL, name), -1);

    CHECK_EQ(removeLocalSegment(e, "never-opened"), 0);
    CHECK_EQ(removeLocalSegment(e, ""), -1);
    CHECK_EQ(removeLocalSegment(e, "/"), -1);
    CHECK_EQ(removeLocalSegment(e, NULL), -1);
    CHECK_EQ(removeLocalSegment(NULL, "x"), -1);

    CHECK_EQ(syncSegmentCache(e), 0);
    CHECK_EQ(syncSegmentCache(NULL), -1);
    CHECK_EQ(syncSegmentCache(BOGUS_HANDLE), -1);
}

static void test_memory(transfer_engine_t e) {
    size_t len = 1 << 20;
    unsigned char *a = malloc(len), *b = malloc(len), *c = malloc(4096 * 4);
    REQUIRE(a && b && c);
    CHECK_EQ(registerLocalMemory(e, a, len, "cpu:0", 1), 0);
    CHECK_EQ(registerLocalMemory(e, a + 100, 10, "cpu:0", 1), -7);
    CHECK(last_error_is("registerLocalMemory"));
    CHECK_EQ(registerLocalMemory(e, a, len, "cpu:0", 1), -7);
    CHECK_EQ(registerLocalMemory(e, a + len - 1, 2, "cpu:0", 1), -7);
    CHECK_EQ(registerLocalMemory(e, b, 0, "cpu:0", 1), -1);
    CHECK_EQ(registerLocalMemory(e, NULL, 16, "cpu:0", 1), -1);
    CHECK_EQ(registerLocalMemory(e, b, SIZE_MAX, "cpu:0", 1), -1);
    CHECK_EQ(registerLocalMemory(NULL, b, len, "cpu:0", 1), -1);
    CHECK_EQ(registerLocalMemory(BOGUS_HANDLE, b, len, "cpu:0", 1), -1);
    CHECK_EQ(registerLocalMemory(e, b, len, NULL, 0), 0); /* NULL location = "*" */

    CHECK_EQ(unregisterLocalMemory(e, c), -3);
    CHECK(last_error_is("unregisterLocalMemory"));
    CHECK_EQ(unregisterLocalMemory(e, a + 1), -3);
    CHECK_EQ(unregisterLocalMemory(e, NULL), -3);
    CHECK_EQ(unregisterLocalMemory(NULL, a), -1);
    CHECK_EQ(unregisterLocalMemory(e, a), 0);
    CHECK_EQ(unregisterLocalMemory(e, a), -3);
    CHECK_EQ(unregisterLocalMemory(e, b), 0);

    buffer_entry_t list[3] = {{c, 4096}, {c + 4096, 4096}, {c + 8192, 4096}};
    CHECK_EQ(registerLocalMemoryBatch(e, NULL, 2, "cpu:0"), -1);
    CHECK(last_error_is("registerLocalMemoryBatch"));
    CHECK_EQ(registerLocalMemoryBatch(e, NULL, 0, "cpu:0"), 0);
    CHECK_EQ(registerLocalMemoryBatch(e, list, 0, "cpu:0"), 0);
    CHECK_EQ(registerLocalMemoryBatch(e, list, SIZE_MAX, "cpu:0"), -1);
    CHECK_EQ(registerLocalMemoryBatch(NULL, list, 3, "cpu:0"), -1);
    buffer_entry_t zero[2] = {{c, 4096}, {c + 8192, 0}};
    CHECK_EQ(registerLocalMemoryBatch(e, zero, 2, "cpu:0"), -1);
    buffer_entry_t inner_overlap[2] = {{c, 8192}, {c + 4096, 4096}};
    CHECK_EQ(registerLocalMemoryBatch(e, inner_overlap, 2, "cpu:0"), -7);
    CHECK_EQ(registerLocalMemoryBatch(e, list, 3, NULL), 0);
    CHECK_EQ(registerLocalMemory(e, c + 100, 8, "cpu:0", 1), -7);
    buffer_entry_t outer_overlap[2] = {{a, 4096}, {c + 4096, 16}};
    CHECK_EQ(registerLocalMemoryBatch(e, outer_overlap, 2, "cpu:0"), -7);
    CHECK_EQ(unregisterLocalMemory(e, a), -3); /* all-or-none: a was not kept */

    void *addrs[3] = {c, c + 4096, c + 8192};
    CHECK_EQ(unregisterLocalMemoryBatch(e, NULL, 3), -1);
    CHECK(last_error_is("unregisterLocalMemoryBatch"));
    CHECK_EQ(unregisterLocalMemoryBatch(e, NULL, 0), 0);
    CHECK_EQ(unregisterLocalMemoryBatch(NULL, addrs, 3), -1);
    CHECK_EQ(unregisterLocalMemoryBatch(e, addrs, SIZE_MAX), -1);
    CHECK_EQ(unregisterLocalMemoryBatch(e, addrs, 3), 0);
    CHECK_EQ(unregisterLocalMemoryBatch(e, addrs, 3), -3);
    free(a);
    free(b);
    free(c);
}

/* Batches against the engine's own segment (memcpy path). */
static void test_batches(transfer_engine_t e, transfer_engine_t other) {
    size_t len = 64 * 1024;
    unsigned char *target = calloc(1, len), *src = malloc(len);
    REQUIRE(target && src);
    fill_pattern(src, len, 5);
    REQUIRE(registerLocalMemory(e, target, len, "cpu:0", 1) == 0);
    uint64_t base = (uint64_t)(uintptr_t)target;

    CHECK(allocateBatchID(NULL, 4) == INVALID_BATCH);
    CHECK(last_error_is("allocateBatchID"));
    CHECK(allocateBatchID(BOGUS_HANDLE, 4) == INVALID_BATCH);
    batch_id_t batch = allocateBatchID(e, 2);
    CHECK(batch != INVALID_BATCH);
    CHECK(allocateBatchID(e, 0) != INVALID_BATCH);

    transfer_request_t reqs[3] = {
        request(OPCODE_WRITE, src, LOCAL_SEGMENT, base, 4096),
        request(OPCODE_WRITE, src + 4096, LOCAL_SEGMENT, base + 4096, 4096),
        request(OPCODE_WRITE, src + 8192, LOCAL_SEGMENT, base + 8192, 4096),
    };
    /* Bad arguments: status code 1, nothing added. */
    CHECK_EQ(submitTransfer(NULL, batch, reqs, 1), 1);
    CHECK(last_error_is("submitTransfer"));
    CHECK_EQ(submitTransfer(BOGUS_HANDLE, batch, reqs, 1), 1);
    CHECK_EQ(submitTransfer(e, batch, NULL, 1), 1);
    CHECK_EQ(submitTransfer(e, batch, reqs, SIZE_MAX), 1);
    CHECK_EQ(submitTransfer(e, INVALID_BATCH, reqs, 1), 1);
    CHECK_EQ(submitTransfer(e, 0, reqs, 1), 1);
    CHECK_EQ(submitTransfer(e, batch + 1000, reqs, 1), 1);
    transfer_request_t bad_op = request(7, src, LOCAL_SEGMENT, base, 16);
    CHECK_EQ(submitTransfer(e, batch, &bad_op, 1), 1);
    CHECK(strstr(mooncake_last_error_message(), "opcode") != NULL);
    transfer_request_t unknown = request(OPCODE_WRITE, src, 42, base, 16);
    CHECK_EQ(submitTransfer(e, batch, &unknown, 1), 1);
    transfer_request_t negative = request(OPCODE_WRITE, src, -1, base, 16);
    CHECK_EQ(submitTransfer(e, batch, &negative, 1), 1);
    /* Empty submit: fine. */
    CHECK_EQ(submitTransfer(e, batch, NULL, 0), 0);
    CHECK_EQ(submitTransfer(e, batch, reqs, 0), 0);
    /* Capacity 2: three do not fit (code 2) and nothing is added. */
    CHECK_EQ(submitTransfer(e, batch, reqs, 3), 2);
    CHECK(last_error_is("submitTransfer"));
    transfer_status_t st;
    CHECK_EQ(getTransferStatus(e, batch, 0, &st), 1); /* still empty */
    CHECK_EQ(submitTransfer(e, batch, reqs, 2), 0);
    CHECK_EQ(submitTransfer(e, batch, reqs + 2, 1), 2);

    /* Not yet observed terminal: busy (4). */
    CHECK_EQ(freeBatchID(e, batch), 4);
    CHECK(last_error_is("freeBatchID"));
    CHECK_EQ(wait_task(e, batch, 0, &st), STATUS_COMPLETED);
    CHECK_EQ(st.transferred_bytes, 4096);
    CHECK_EQ(freeBatchID(e, batch), 4); /* task 1 not observed yet */

    /* Out of range: 1, *status untouched. */
    transfer_status_t sentinel;
    memset(&sentinel, 0x5A, sizeof sentinel);
    CHECK_EQ(getTransferStatus(e, batch, 2, &sentinel), 1);
    CHECK(last_error_is("getTransferStatus"));
    CHECK_EQ(sentinel.status, 0x5A5A5A5A);
    CHECK_EQ(sentinel.transferred_bytes, 0x5A5A5A5A5A5A5A5AULL);
    CHECK_EQ(getTransferStatus(e, batch, SIZE_MAX, &sentinel), 1);
    CHECK_EQ(getTransferStatus(e, batch, 0, NULL), 1);
    CHECK_EQ(getTransferStatus(NULL, batch, 0, &st), 1);
    CHECK_EQ(getTransferStatus(e, INVALID_BATCH, 0, &st), 1);

    CHECK_EQ(wait_task(e, batch, 1, &st), STATUS_COMPLETED);
    CHECK(memcmp(target, src, 8192) == 0);

    /* A foreign batch id (another engine's) is unknown here, and vice versa. */
    batch_id_t foreign = allocateBatchID(other, 1);
    CHECK(foreign != INVALID_BATCH);
    CHECK_EQ(submitTransfer(e, foreign, reqs, 1), 1);
    CHECK_EQ(getTransferStatus(e, foreign, 0, &st), 1);
    CHECK_EQ(freeBatchID(e, foreign), 1);
    CHECK_EQ(freeBatchID(other, batch), 1);
    CHECK_EQ(freeBatchID(other, foreign), 0);

    CHECK_EQ(freeBatchID(NULL, batch), 1);
    CHECK_EQ(freeBatchID(e, batch), 0);
    /* Stale: freed ids are never valid again. */
    CHECK_EQ(freeBatchID(e, batch), 1);
    CHECK_EQ(submitTransfer(e, batch, reqs, 1), 1);
    CHECK_EQ(getTransferStatus(e, batch, 0, &st), 1);

    /* A failing task: destination outside every registered region. */
    batch_id_t b2 = allocateBatchID(e, 2);
    transfer_request_t outside[2] = {
        request(OPCODE_WRITE, src, LOCAL_SEGMENT, base + len - 10, 4096),
        request(OPCODE_READ, src, LOCAL_SEGMENT, base, 0),
    };
    CHECK_EQ(submitTransfer(e, b2, outside, 2), 0);
    CHECK_EQ(wait_task(e, b2, 0, &st), STATUS_FAILED);
    CHECK_EQ(st.transferred_bytes, 0);
    CHECK_EQ(wait_task(e, b2, 1, &st), STATUS_COMPLETED); /* zero length */
    CHECK_EQ(st.transferred_bytes, 0);
    CHECK_EQ(freeBatchID(e, b2), 0);

    /* Read back through the memcpy path. */
    unsigned char *back = calloc(1, 8192);
    REQUIRE(back != NULL);
    batch_id_t b3 = allocateBatchID(e, 1);
    transfer_request_t rd = request(OPCODE_READ, back, LOCAL_SEGMENT, base, 8192);
    CHECK_EQ(submitTransfer(e, b3, &rd, 1), 0);
    CHECK_EQ(wait_task(e, b3, 0, &st), STATUS_COMPLETED);
    CHECK(memcmp(back, src, 8192) == 0);
    CHECK_EQ(freeBatchID(e, b3), 0);

    /* submitTransferWithNotify: the notify reaches this engine's own daemon once the
     * whole batch is observed complete. */
    notify_msg_t note = {(char *)"self", (char *)"done"};
    batch_id_t b4 = allocateBatchID(e, 2);
    CHECK_EQ(submitTransferWithNotify(e, b4, reqs, 0, note), 1);
    CHECK(last_error_is("submitTransferWithNotify"));
    CHECK_EQ(submitTransferWithNotify(e, b4, NULL, 1, note), 1);
    CHECK_EQ(submitTransferWithNotify(NULL, b4, reqs, 1, note), 1);
    CHECK_EQ(submitTransferWithNotify(e, INVALID_BATCH, reqs, 1, note), 1);
    CHECK_EQ(submitTransferWithNotify(e, b4, reqs, 3, note), 2);
    CHECK_EQ(submitTransferWithNotify(e, b4, &unknown, 1, note), 1);
    CHECK_EQ(submitTransferWithNotify(e, b4, reqs, 2, note), 0);
    CHECK_EQ(wait_task(e, b4, 0, &st), STATUS_COMPLETED);
    CHECK_EQ(wait_task(e, b4, 1, &st), STATUS_COMPLETED);
    CHECK_EQ(freeBatchID(e, b4), 0);

    int size = -1;
    notify_msg_t *got = NULL;
    double deadline = now_seconds() + TEST_DEADLINE_SECONDS;
    while (now_seconds() < deadline) {
        got = getNotifsFromEngine(e, &size);
        if (got != NULL) break;
        CHECK_EQ(size, 0);
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    REQUIRE(got != NULL);
    CHECK_EQ(size, 1);
    CHECK(strcmp(got[0].name, "self") == 0 && strcmp(got[0].msg, "done") == 0);
    CHECK_EQ(freeNotifsMsgBuf(got, size), 0);

    unregisterLocalMemory(e, target);
    free(back);
    free(target);
    free(src);
}

static void test_notifies(transfer_engine_t e) {
    int size = 77;
    CHECK(getNotifsFromEngine(e, &size) == NULL);
    CHECK_EQ(size, 0);
    CHECK_EQ(strlen(mooncake_last_error_message()), 0); /* empty is not an error */
    size = 77;
    CHECK(getNotifsFromEngine(NULL, &size) == NULL);
    CHECK_EQ(size, 0);
    CHECK(last_error_is("getNotifsFromEngine"));
    CHECK(getNotifsFromEngine(e, NULL) == NULL);
    CHECK_EQ(freeNotifsMsgBuf(NULL, 0), 0);
    CHECK_EQ(freeNotifsMsgBuf(NULL, 5), 0);

    notify_msg_t note = {(char *)"n", (char *)"m"};
    CHECK_EQ(genNotifyInEngine(e, 77, note), -200);
    CHECK(last_error_is("genNotifyInEngine"));
    CHECK_EQ(genNotifyInEngine(e, UINT64_MAX, note), -200);
    CHECK_EQ(genNotifyInEngine(e, (uint64_t)1 << 40, note), -200);
    CHECK_EQ(genNotifyInEngine(NULL, LOCAL_SEGMENT, note), -1);
    CHECK_EQ(genNotifyInEngine(BOGUS_HANDLE, LOCAL_SEGMENT, note), -1);

    /* To itself, in order; NULL strings travel as empty ones. */
    char name[32], msg[32];
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "name-%d", i);
        snprintf(msg, sizeof msg, "msg-%d", i);
        notify_msg_t n = {name, msg};
        CHECK_EQ(genNotifyInEngine(e, LOCAL_SEGMENT, n), 0);
    }
    notify_msg_t nulls = {NULL, NULL};
    CHECK_EQ(genNotifyInEngine(e, LOCAL_SEGMENT, nulls), 0);
    notify_msg_t *got = getNotifsFromEngine(e, &size);
    REQUIRE(got != NULL);
    CHECK_EQ(size, 4);
    for (int i = 0; i < 3 && i < size; i++) {
        snprintf(name, sizeof name, "name-%d", i);
        snprintf(msg, sizeof msg, "msg-%d", i);
        CHECK(strcmp(got[i].name, name) == 0 && strcmp(got[i].msg, msg) == 0);
    }
    if (size == 4) CHECK(got[3].name[0] == '\0' && got[3].msg[0] == '\0');
    CHECK_EQ(freeNotifsMsgBuf(got, size), 0);
    CHECK(getNotifsFromEngine(e, &size) == NULL);
    CHECK_EQ(size, 0);
}

static void test_destroyed(transfer_engine_t dead) {
    char buf[64];
    int size = 5;
    size_t count = 5;
    nic_load_stat_t stats[1];
    transfer_status_t st;
    notify_msg_t note = {(char *)"n", (char *)"m"};
    transfer_request_t r = request(OPCODE_WRITE, buf, LOCAL_SEGMENT, 0, 1);
    buffer_entry_t entry = {buf, sizeof buf};
    void *addr = buf;
    CHECK_EQ(discoverTopology(dead), -1);
    CHECK(last_error_is("discoverTopology"));
    CHECK_EQ(mooncake_last_error_errno(), EBADF);
    CHECK_EQ(getLocalIpAndPort(dead, buf, sizeof buf), -1);
    CHECK(installTransport(dead, "tcp", NULL) == NULL);
    CHECK_EQ(uninstallTransport(dead, "tcp"), -1);
    CHECK_EQ(openSegment(dead, "x"), -1);
    CHECK_EQ(openSegmentNoCache(dead, "x"), -1);
    CHECK_EQ(closeSegment(dead, 0), -1);
    CHECK_EQ(warmupEfaSegment(dead, "x"), -1);
    CHECK_EQ(removeLocalSegment(dead, "x"), -1);
    CHECK_EQ(registerLocalMemory(dead, buf, sizeof buf, "cpu:0", 1), -1);
    CHECK_EQ(unregisterLocalMemory(dead, buf), -1);
    CHECK_EQ(registerLocalMemoryBatch(dead, &entry, 1, "cpu:0"), -1);
    CHECK_EQ(unregisterLocalMemoryBatch(dead, &addr, 1), -1);
    CHECK(allocateBatchID(dead, 1) == INVALID_BATCH);
    CHECK_EQ(submitTransfer(dead, 1, &r, 1), 1);
    CHECK_EQ(submitTransferWithNotify(dead, 1, &r, 1, note), 1);
    CHECK(getNotifsFromEngine(dead, &size) == NULL);
    CHECK_EQ(size, 0);
    CHECK_EQ(genNotifyInEngine(dead, 0, note), -1);
    CHECK_EQ(getTransferStatus(dead, 1, 0, &st), 1);
    CHECK_EQ(freeBatchID(dead, 1), 1);
    CHECK_EQ(syncSegmentCache(dead), -1);
    CHECK_EQ(getNicLoadStats(dead, stats, &count), -1);
    CHECK_EQ(showLinks(dead, buf, sizeof buf, 0), -1);
    enableGracefulShutdown(dead); /* no-op with last error; installs nothing */
    CHECK(last_error_is("enableGracefulShutdown"));
    enableGracefulShutdown(NULL);
    CHECK(last_error_is("enableGracefulShutdown"));
    destroyTransferEngine(dead); /* double destroy: no-op */
    CHECK(last_error_is("destroyTransferEngine"));
    destroyTransferEngine(NULL);
    CHECK(last_error_is("destroyTransferEngine"));
    destroyTransferEngine(BOGUS_HANDLE);
    CHECK(last_error_is("destroyTransferEngine"));
}

int main(void) {
    test_create();
    transfer_engine_t e = p2p_engine(0);
    REQUIRE(e != NULL);
    transfer_engine_t other = p2p_engine(1);
    REQUIRE(other != NULL);
    CHECK(e != other);
    test_identity(e);
    test_memory(e); /* no transport yet: regions are only recorded */
    test_transports(e);
    test_memory(e);
    test_segments(e);
    test_batches(e, other);
    test_notifies(e);
    destroyTransferEngine(other);
    CHECK_EQ(strlen(mooncake_last_error_message()), 0);
    test_destroyed(other);
    destroyTransferEngine(e);
    test_destroyed(e);
    return test_summary("api_errors");
}
