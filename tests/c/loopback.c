/* Two engines in P2PHANDSHAKE mode over loopback TCP: writes and reads with the data
 * verified, capacity / busy / out-of-range codes, a failed task, a peer whose
 * protocol is not installed locally (8), and notifies in both forms. */
#include "test_common.h"

#define TARGET_LEN (8u << 20)
#define LOCAL_LEN (8u << 20)

static int poll_notifies(transfer_engine_t e, int want, notify_msg_t **out) {
    int total = 0, size = 0;
    notify_msg_t *got = NULL;
    double deadline = now_seconds() + TEST_DEADLINE_SECONDS;
    while (now_seconds() < deadline) {
        got = getNotifsFromEngine(e, &size);
        if (got != NULL) break;
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    total = got ? size : 0;
    *out = got;
    (void)want;
    return total;
}

int main(void) {
    transfer_engine_t target = p2p_engine(1);
    transfer_engine_t initiator = p2p_engine(1);
    REQUIRE(target != NULL && initiator != NULL);
    unsigned char *remote = calloc(1, TARGET_LEN);
    unsigned char *local = malloc(LOCAL_LEN);
    REQUIRE(remote != NULL && local != NULL);
    fill_pattern(local, LOCAL_LEN, 3);
    CHECK_EQ(registerLocalMemory(target, remote, TARGET_LEN, "cpu:0", 1), 0);
    CHECK_EQ(registerLocalMemory(initiator, local, LOCAL_LEN, "cpu:0", 1), 0);
    uint64_t raddr = (uint64_t)(uintptr_t)remote;

    char tname[128], iname[128];
    segment_name(target, tname, sizeof tname);
    segment_name(initiator, iname, sizeof iname);
    CHECK(strcmp(tname, iname) != 0);
    printf("target %s, initiator %s\n", tname, iname);

    segment_id_t id = openSegment(initiator, tname);
    CHECK_EQ(id, 1);
    CHECK_EQ(openSegment(initiator, tname), id);
    CHECK_EQ(openSegmentNoCache(initiator, tname), id);
    CHECK_EQ(openSegment(initiator, iname), LOCAL_SEGMENT);
    CHECK_EQ(syncSegmentCache(initiator), 0);
    /* Forgetting the mapping gives a fresh id later; the old one is gone. */
    CHECK_EQ(removeLocalSegment(initiator, tname), 0);
    segment_id_t id2 = openSegment(initiator, tname);
    CHECK(id2 > id);
    transfer_status_t st;
    batch_id_t stale = allocateBatchID(initiator, 1);
    transfer_request_t old = request(OPCODE_WRITE, local, id, raddr, 16);
    CHECK_EQ(submitTransfer(initiator, stale, &old, 1), 1);
    CHECK_EQ(freeBatchID(initiator, stale), 0);
    id = id2;

    /* Writes of several sizes, packed back to back. */
    const uint64_t sizes[] = {1, 7, 4096, 65536, 1u << 20, (1u << 20) + 13, 3u << 20};
    const size_t n = sizeof sizes / sizeof sizes[0];
    transfer_request_t reqs[sizeof sizes / sizeof sizes[0]];
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        reqs[i] = request(OPCODE_WRITE, local + off, id, raddr + off, sizes[i]);
        off += sizes[i];
    }
    REQUIRE(off <= TARGET_LEN);
    batch_id_t b = allocateBatchID(initiator, n);
    CHECK(b != INVALID_BATCH);
    CHECK_EQ(submitTransfer(initiator, b, reqs, n), 0);
    CHECK_EQ(freeBatchID(initiator, b), 4); /* nothing observed yet */
    CHECK_EQ(submitTransfer(initiator, b, reqs, 1), 2); /* full */
    transfer_status_t sentinel;
    memset(&sentinel, 0x33, sizeof sentinel);
    CHECK_EQ(getTransferStatus(initiator, b, n, &sentinel), 1);
    CHECK_EQ(sentinel.status, 0x33333333);
    for (size_t i = 0; i < n; i++) {
        CHECK_EQ(wait_task(initiator, b, i, &st), STATUS_COMPLETED);
        CHECK_EQ(st.transferred_bytes, sizes[i]);
    }
    CHECK_EQ(freeBatchID(initiator, b), 0);
    CHECK_EQ(freeBatchID(initiator, b), 1);
    CHECK(memcmp(remote, local, off) == 0);

    /* Reads: new data on the target, pulled into the initiator. */
    fill_pattern(remote, 2u << 20, 99);
    batch_id_t r = allocateBatchID(initiator, 2);
    transfer_request_t rd[2] = {
        request(OPCODE_READ, local, id, raddr, 1u << 20),
        request(OPCODE_READ, local + (1u << 20), id, raddr + (1u << 20), 1u << 20),
    };
    CHECK_EQ(submitTransfer(initiator, r, rd, 2), 0);
    CHECK_EQ(wait_task(initiator, r, 0, &st), STATUS_COMPLETED);
    CHECK_EQ(st.transferred_bytes, 1u << 20);
    CHECK_EQ(wait_task(initiator, r, 1, &st), STATUS_COMPLETED);
    CHECK(memcmp(local, remote, 2u << 20) == 0);
    CHECK_EQ(freeBatchID(initiator, r), 0);

    /* A write outside the target's registered memory fails; its neighbours do not. */
    batch_id_t f = allocateBatchID(initiator, 3);
    transfer_request_t mixed[3] = {
        request(OPCODE_WRITE, local, id, raddr, 4096),
        request(OPCODE_WRITE, local, id, raddr + TARGET_LEN - 100, 4096),
        request(OPCODE_WRITE, local + 4096, id, raddr + 4096, 4096),
    };
    CHECK_EQ(submitTransfer(initiator, f, mixed, 3), 0);
    CHECK_EQ(wait_task(initiator, f, 0, &st), STATUS_COMPLETED);
    CHECK_EQ(wait_task(initiator, f, 1, &st), STATUS_FAILED);
    CHECK_EQ(st.transferred_bytes, 0);
    CHECK_EQ(wait_task(initiator, f, 2, &st), STATUS_COMPLETED);
    CHECK_EQ(freeBatchID(initiator, f), 0);

    /* A peer opened by an engine without any transport: code 8 at submit. */
    transfer_engine_t bare = p2p_engine(0);
    REQUIRE(bare != NULL);
    segment_id_t bare_id = openSegment(bare, tname);
    CHECK(bare_id > 0);
    batch_id_t nb = allocateBatchID(bare, 1);
    transfer_request_t unsupported = request(OPCODE_WRITE, local, bare_id, raddr, 16);
    CHECK_EQ(submitTransfer(bare, nb, &unsupported, 1), 8);
    CHECK(strcmp(mooncake_last_error_function(), "submitTransfer") == 0);
    CHECK_EQ(getTransferStatus(bare, nb, 0, &st), 1); /* nothing was added */
    CHECK_EQ(freeBatchID(bare, nb), 0);
    destroyTransferEngine(bare);

    /* submitTransferWithNotify: the target receives it once the batch completed. */
    notify_msg_t note = {(char *)"kv-ready", (char *)"{\"req\":42}"};
    batch_id_t wn = allocateBatchID(initiator, 2);
    transfer_request_t two[2] = {
        request(OPCODE_WRITE, local, id, raddr, 65536),
        request(OPCODE_WRITE, local + 65536, id, raddr + 65536, 65536),
    };
    CHECK_EQ(submitTransferWithNotify(initiator, wn, two, 2, note), 0);
    CHECK_EQ(wait_task(initiator, wn, 0, &st), STATUS_COMPLETED);
    CHECK_EQ(wait_task(initiator, wn, 1, &st), STATUS_COMPLETED);
    CHECK_EQ(freeBatchID(initiator, wn), 0);
    notify_msg_t *got = NULL;
    int size = poll_notifies(target, 1, &got);
    REQUIRE(got != NULL);
    CHECK_EQ(size, 1);
    CHECK(strcmp(got[0].name, "kv-ready") == 0);
    CHECK(strcmp(got[0].msg, "{\"req\":42}") == 0);
    CHECK_EQ(freeNotifsMsgBuf(got, size), 0);
    CHECK(memcmp(remote, local, 131072) == 0);

    /* genNotifyInEngine: sent at once; the caller's strings may be freed right after. */
    char *name = strdup("direct"), *msg = strdup("hello target");
    REQUIRE(name && msg);
    notify_msg_t direct = {name, msg};
    CHECK_EQ(genNotifyInEngine(initiator, (uint64_t)id, direct), 0);
    free(name);
    free(msg);
    size = poll_notifies(target, 1, &got);
    REQUIRE(got != NULL);
    CHECK_EQ(size, 1);
    CHECK(strcmp(got[0].name, "direct") == 0 && strcmp(got[0].msg, "hello target") == 0);
    CHECK_EQ(freeNotifsMsgBuf(got, size), 0);
    CHECK(getNotifsFromEngine(initiator, &size) == NULL); /* nothing went the other way */
    CHECK_EQ(size, 0);
    CHECK_EQ(genNotifyInEngine(initiator, (uint64_t)(id + 5), note), -200);

    /* The target opens the initiator back and reads from it. */
    segment_id_t back = openSegment(target, iname);
    CHECK_EQ(back, 1);
    fill_pattern(local, 4096, 11);
    batch_id_t tb = allocateBatchID(target, 1);
    transfer_request_t pull = request(OPCODE_READ, remote, back, (uint64_t)(uintptr_t)local, 4096);
    CHECK_EQ(submitTransfer(target, tb, &pull, 1), 0);
    CHECK_EQ(wait_task(target, tb, 0, &st), STATUS_COMPLETED);
    CHECK(memcmp(remote, local, 4096) == 0);
    CHECK_EQ(freeBatchID(target, tb), 0);

    CHECK_EQ(unregisterLocalMemory(target, remote), 0);
    CHECK_EQ(unregisterLocalMemory(initiator, local), 0);
    destroyTransferEngine(initiator);
    destroyTransferEngine(target);
    free(remote);
    free(local);
    return test_summary("loopback");
}
