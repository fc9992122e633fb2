/* Shared helpers for the C ABI tests: checks, a summary line, polling with deadlines.
 * Include this first in every test file. */
#ifndef MOONCAKE_TEST_COMMON_H
#define MOONCAKE_TEST_COMMON_H

#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mooncake/mooncake_ext.h"
#include "mooncake/transfer_engine_c.h"

static int g_passed;
static int g_failed;

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (cond) {                                                                    \
            g_passed++;                                                                \
        } else {                                                                       \
            g_failed++;                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s (last error: \"%s\")\n", __FILE__, \
                    __LINE__, #cond, mooncake_last_error_message());                   \
        }                                                                              \
    } while (0)

#define CHECK_EQ(actual, expected)                                                      \
    do {                                                                                \
        long long a_ = (long long)(actual);                                             \
        long long e_ = (long long)(expected);                                           \
        if (a_ == e_) {                                                                 \
            g_passed++;                                                                 \
        } else {                                                                        \
            g_failed++;                                                                 \
            fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %lld, expected %s == %lld "  \
                            "(last error: \"%s\")\n",                                   \
                    __FILE__, __LINE__, #actual, a_, #expected, e_,                     \
                    mooncake_last_error_message());                                     \
        }                                                                               \
    } while (0)

/* Stops the program when a precondition for the remaining checks does not hold. */
#define REQUIRE(cond)                                                                  \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "%s:%d: REQUIRE failed: %s (last error: \"%s\")\n",         \
                    __FILE__, __LINE__, #cond, mooncake_last_error_message());         \
            fprintf(stderr, "%d passed, %d failed (aborted)\n", g_passed, g_failed + 1); \
            exit(1);                                                                   \
        }                                                                              \
        g_passed++;                                                                    \
    } while (0)

static inline int test_summary(const char *name) {
    printf("%s: %d passed, %d failed\n", name, g_passed, g_failed);
    fflush(stdout);
    return g_failed == 0 ? 0 : 1;
}

static inline double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Generous: only reached when something is broken; nothing asserts on timing. */
#define TEST_DEADLINE_SECONDS 60.0

static inline int is_terminal(int status) {
    return status == STATUS_COMPLETED || status == STATUS_FAILED;
}

/* Polls one task until it is terminal or the deadline passes; returns its status
 * (or -1 if getTransferStatus itself failed). */
static inline int wait_task(transfer_engine_t engine, batch_id_t batch, size_t task,
                            transfer_status_t *out) {
    double deadline = now_seconds() + TEST_DEADLINE_SECONDS;
    transfer_status_t st;
    memset(&st, 0, sizeof st);
    for (;;) {
        int rc = getTransferStatus(engine, batch, task, &st);
        if (rc != 0) return -1;
        if (is_terminal(st.status) || now_seconds() > deadline) break;
        struct timespec pause = {0, 200000};
        nanosleep(&pause, NULL);
    }
    if (out) *out = st;
    return st.status;
}

/* A P2PHANDSHAKE engine on loopback; auto_discover installs TCP. */
static inline transfer_engine_t p2p_engine(int auto_discover) {
    return createTransferEngine("P2PHANDSHAKE", "127.0.0.1", "ignored-host", 12345,
                                auto_discover);
}

/* The engine's segment name (in P2P mode, its "ip:port"). */
static inline void segment_name(transfer_engine_t engine, char *buf, size_t len) {
    if (getLocalIpAndPort(engine, buf, len) != 0) buf[0] = '\0';
}

static inline void fill_pattern(unsigned char *buf, size_t len, unsigned seed) {
    for (size_t i = 0; i < len; i++) buf[i] = (unsigned char)(i * 31u + seed * 7u + (i >> 9));
}

static inline transfer_request_t request(int opcode, void *source, segment_id_t target,
                                         uint64_t target_offset, uint64_t length) {
    transfer_request_t r;
    memset(&r, 0, sizeof r);
    r.opcode = opcode;
    r.source = source;
    r.target_id = target;
    r.target_offset = target_offset;
    r.length = length;
    return r;
}

#endif /* MOONCAKE_TEST_COMMON_H */
