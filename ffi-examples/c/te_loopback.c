/* Transfer Engine from C: two engines in one process, both in P2PHANDSHAKE mode on
 * loopback TCP. The initiator WRITEs a buffer into the target's registered memory,
 * then READs it back into a second buffer; both copies are verified byte for byte.
 *
 * Written against upstream's header and functions only, so the same source builds
 * against upstream's libtransfer_engine.so (see ../preload/). It prints which library
 * answered (mooncake_version, looked up at run time, exists only in libmooncake).
 *
 *   cc te_loopback.c $(pkg-config --cflags --libs mooncake) -ldl -o te_loopback
 *
 * Exit status 0 on success, 1 on any failure (with the reason on stderr). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <transfer_engine_c.h>

#define LEN (4u << 20) /* 4 MiB */

static int fail(const char *what) {
    /* The extension is optional: upstream's library has no last-error call. */
    const char *(*last_error)(void) =
        (const char *(*)(void))dlsym(RTLD_DEFAULT, "mooncake_last_error_message");
    fprintf(stderr, "te_loopback: %s failed%s%s\n", what, last_error ? ": " : "",
            last_error ? last_error() : "");
    return 1;
}

/* Polls until every task of the batch is COMPLETED (0) or one FAILED / 10 s pass (-1). */
static int wait_batch(transfer_engine_t engine, batch_id_t batch, size_t count) {
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        size_t done = 0;
        for (size_t i = 0; i < count; i++) {
            transfer_status_t st;
            if (getTransferStatus(engine, batch, i, &st) != 0) return -1;
            if (st.status == STATUS_FAILED) return -1;
            if (st.status == STATUS_COMPLETED) done++;
        }
        if (done == count) return 0;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec > 10) return -1;
        struct timespec pause = {0, 100000};
        nanosleep(&pause, NULL);
    }
}

/* One request, submitted as its own batch and waited for. */
static int transfer(transfer_engine_t engine, int opcode, void *local, segment_id_t target,
                    uint64_t remote_addr, uint64_t length) {
    batch_id_t batch = allocateBatchID(engine, 1);
    if (batch == INVALID_BATCH) return fail("allocateBatchID");
    transfer_request_t req;
    memset(&req, 0, sizeof req);
    req.opcode = opcode;
    req.source = local;
    req.target_id = target;
    req.target_offset = remote_addr; /* an absolute address in the target process */
    req.length = length;
    if (submitTransfer(engine, batch, &req, 1) != 0) return fail("submitTransfer");
    int rc = wait_batch(engine, batch, 1);
    if (freeBatchID(engine, batch) != 0) return fail("freeBatchID");
    return rc == 0 ? 0 : fail(opcode == OPCODE_WRITE ? "WRITE" : "READ");
}

int main(void) {
    const char *(*version)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "mooncake_version");
    if (version)
        printf("backend: libmooncake %s\n", version());
    else
        printf("backend: no mooncake_version in the dynamic symbols (upstream library, or "
               "libmooncake linked statically)\n");

    /* auto_discover = 1 installs the TCP transport. In P2PHANDSHAKE mode the segment
     * name becomes "127.0.0.1:<rpc port>" (read back with getLocalIpAndPort). */
    transfer_engine_t target = createTransferEngine("P2PHANDSHAKE", "127.0.0.1", "127.0.0.1", 0, 1);
    if (!target) return fail("createTransferEngine (target)");
    transfer_engine_t initiator =
        createTransferEngine("P2PHANDSHAKE", "127.0.0.1", "127.0.0.1", 0, 1);
    if (!initiator) return fail("createTransferEngine (initiator)");

    unsigned char *remote = calloc(1, LEN), *out = malloc(LEN), *back = calloc(1, LEN);
    if (!remote || !out || !back) return fail("malloc");
    for (size_t i = 0; i < LEN; i++) out[i] = (unsigned char)(i * 131u + (i >> 12));

    if (registerLocalMemory(target, remote, LEN, "cpu:0", 1) != 0)
        return fail("registerLocalMemory (target)");
    if (registerLocalMemory(initiator, out, LEN, "cpu:0", 1) != 0 ||
        registerLocalMemory(initiator, back, LEN, "cpu:0", 1) != 0)
        return fail("registerLocalMemory (initiator)");

    char name[256];
    if (getLocalIpAndPort(target, name, sizeof name) != 0) return fail("getLocalIpAndPort");
    segment_id_t seg = openSegment(initiator, name);
    if (seg < 0) return fail("openSegment");
    printf("target segment %s opened as id %d\n", name, (int)seg);

    uint64_t raddr = (uint64_t)(uintptr_t)remote;
    if (transfer(initiator, OPCODE_WRITE, out, seg, raddr, LEN) != 0) return 1;
    if (memcmp(remote, out, LEN) != 0) return fail("verifying the WRITE");
    if (transfer(initiator, OPCODE_READ, back, seg, raddr, LEN) != 0) return 1;
    if (memcmp(back, out, LEN) != 0) return fail("verifying the READ");
    printf("wrote and read back %u bytes: verified\n", LEN);

    closeSegment(initiator, seg);
    unregisterLocalMemory(initiator, out);
    unregisterLocalMemory(initiator, back);
    unregisterLocalMemory(target, remote);
    destroyTransferEngine(initiator);
    destroyTransferEngine(target);
    free(remote);
    free(out);
    free(back);
    printf("te_loopback: OK\n");
    return 0;
}
