/* Several threads share one initiator engine: each allocates batches, submits writes
 * and reads to a peer, polls every task with getTransferStatus, frees its batches and
 * verifies its own slice of the data. Other threads poll and query concurrently. */
#include "test_common.h"

#include <pthread.h>

#define THREADS 6
#define ITERATIONS 25
#define CHUNK 16384u
#define CHUNKS 4u
#define SLICE (CHUNK * CHUNKS)

struct shared {
    transfer_engine_t initiator;
    segment_id_t peer;
    uint64_t remote_base;
    unsigned char *local;
    const char *peer_name;
};

struct worker {
    struct shared *s;
    int index;
    int failures;
    int checks;
};

#define WCHECK(w, cond)                                                                 \
    do {                                                                                \
        (w)->checks++;                                                                  \
        if (!(cond)) {                                                                  \
            (w)->failures++;                                                            \
            fprintf(stderr, "thread %d: %s:%d: %s (last error: \"%s\")\n", (w)->index,  \
                    __FILE__, __LINE__, #cond, mooncake_last_error_message());          \
        }                                                                               \
    } while (0)

static int run_batch(struct worker *w, transfer_request_t *reqs, size_t n) {
    transfer_engine_t e = w->s->initiator;
    batch_id_t b = allocateBatchID(e, n);
    WCHECK(w, b != INVALID_BATCH);
    if (b == INVALID_BATCH) return 0;
    int rc = submitTransfer(e, b, reqs, n);
    WCHECK(w, rc == 0);
    int ok = rc == 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        transfer_status_t st = {0, 0}; /* wait_task leaves it untouched on error */
        int status = wait_task(e, b, i, &st);
        WCHECK(w, status == STATUS_COMPLETED);
        WCHECK(w, st.transferred_bytes == reqs[i].length);
        ok = ok && status == STATUS_COMPLETED;
    }
    WCHECK(w, freeBatchID(e, b) == 0);
    return ok;
}

static void *work(void *arg) {
    struct worker *w = arg;
    struct shared *s = w->s;
    unsigned char *src = s->local + (size_t)w->index * 2 * SLICE;
    unsigned char *dst = src + SLICE;
    uint64_t remote = s->remote_base + (uint64_t)w->index * SLICE;
    char buf[128];
    for (int it = 0; it < ITERATIONS; it++) {
        fill_pattern(src, SLICE, (unsigned)(w->index * 1000 + it));
        memset(dst, 0, SLICE);
        transfer_request_t reqs[CHUNKS];
        for (unsigned c = 0; c < CHUNKS; c++)
            reqs[c] = request(OPCODE_WRITE, src + c * CHUNK, s->peer, remote + c * CHUNK, CHUNK);
        if (!run_batch(w, reqs, CHUNKS)) continue;
        for (unsigned c = 0; c < CHUNKS; c++)
            reqs[c] = request(OPCODE_READ, dst + c * CHUNK, s->peer, remote + c * CHUNK, CHUNK);
        if (!run_batch(w, reqs, CHUNKS)) continue;
        WCHECK(w, memcmp(src, dst, SLICE) == 0);
        /* Concurrent lookups on the shared engine. */
        WCHECK(w, openSegment(s->initiator, s->peer_name) == s->peer);
        WCHECK(w, getLocalIpAndPort(s->initiator, buf, sizeof buf) == 0);
        /* Errors are per thread: this one's last error is not another's. */
        WCHECK(w, freeBatchID(s->initiator, INVALID_BATCH) == 1);
        WCHECK(w, strcmp(mooncake_last_error_function(), "freeBatchID") == 0);
    }
    return NULL;
}

int main(void) {
    transfer_engine_t target = p2p_engine(1);
    transfer_engine_t initiator = p2p_engine(1);
    REQUIRE(target != NULL && initiator != NULL);
    size_t remote_len = (size_t)THREADS * SLICE, local_len = (size_t)THREADS * 2 * SLICE;
    unsigned char *remote = calloc(1, remote_len), *local = calloc(1, local_len);
    REQUIRE(remote != NULL && local != NULL);
    REQUIRE(registerLocalMemory(target, remote, remote_len, "cpu:0", 1) == 0);
    REQUIRE(registerLocalMemory(initiator, local, local_len, "cpu:0", 1) == 0);
    char tname[128];
    segment_name(target, tname, sizeof tname);
    segment_id_t peer = openSegment(initiator, tname);
    REQUIRE(peer > 0);

    struct shared s = {initiator, peer, (uint64_t)(uintptr_t)remote, local, tname};
    struct worker workers[THREADS];
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++) {
        workers[i] = (struct worker){&s, i, 0, 0};
        REQUIRE(pthread_create(&threads[i], NULL, work, &workers[i]) == 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        g_passed += workers[i].checks - workers[i].failures;
        g_failed += workers[i].failures;
    }
    CHECK_EQ(unregisterLocalMemory(initiator, local), 0);
    CHECK_EQ(unregisterLocalMemory(target, remote), 0);
    destroyTransferEngine(initiator);
    destroyTransferEngine(target);
    free(remote);
    free(local);
    return test_summary("threads");
}
