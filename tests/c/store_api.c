/* Every function of store_c.h: NULL, unknown and destroyed handles, a handle that is
 * not set up, argument validation, setup failures (which must return, not hang), and
 * -- when MOONCAKE_TEST_MASTER=host:port names a reachable master -- real puts and
 * gets between two stores in this process over TCP (P2PHANDSHAKE metadata). */
#include "test_common.h"

#include "mooncake/store_c.h"

#include <stddef.h>

/* Upstream's layout (x86-64 / aarch64 LP64), as its Rust bindings assert. */
_Static_assert(sizeof(mooncake_replicate_config_t) == 32, "size");
_Static_assert(offsetof(mooncake_replicate_config_t, replica_num) == 0, "replica_num");
_Static_assert(offsetof(mooncake_replicate_config_t, with_soft_pin) == 8, "with_soft_pin");
_Static_assert(offsetof(mooncake_replicate_config_t, with_hard_pin) == 12, "with_hard_pin");
_Static_assert(offsetof(mooncake_replicate_config_t, preferred_segments) == 16, "preferred");
_Static_assert(offsetof(mooncake_replicate_config_t, preferred_segments_count) == 24, "count");

#define BOGUS_STORE ((mooncake_store_t)(uintptr_t)0x12345678u)

static const char *KEYS2[2] = {"k1", "k2"};

static void test_bad_handles(mooncake_store_t h) {
    char buf[64] = "x";
    int ires[2] = {7, 7};
    int64_t lres[2] = {7, 7};
    void *bufs[2] = {buf, buf};
    size_t sizes[2] = {1, 1};
    mooncake_store_destroy(h); /* no-op */
    CHECK_EQ(mooncake_store_setup(h, "127.0.0.1", "P2PHANDSHAKE", 0, 0, "tcp", "", "x"), -1);
    CHECK_EQ(mooncake_store_init_all(h, "tcp", "", 0), -1);
    CHECK_EQ(mooncake_store_health_check(h), -1);
    CHECK_EQ(mooncake_store_put(h, "k", buf, 1, NULL), -1);
    CHECK_EQ(mooncake_store_put_from(h, "k", buf, 1, NULL), -1);
    CHECK_EQ(mooncake_store_batch_put_from(h, KEYS2, bufs, sizes, 2, NULL, ires), -1);
    CHECK(ires[0] == 7 && ires[1] == 7);
    CHECK_EQ(mooncake_store_get_into(h, "k", buf, sizeof buf), -1);
    CHECK_EQ(mooncake_store_batch_get_into(h, KEYS2, bufs, sizes, 2, lres), -1);
    CHECK(lres[0] == 7 && lres[1] == 7);
    CHECK_EQ(mooncake_store_is_exist(h, "k"), -1);
    CHECK_EQ(mooncake_store_batch_is_exist(h, KEYS2, 2, ires), -1);
    CHECK_EQ(mooncake_store_get_size(h, "k"), -1);
    CHECK_EQ(mooncake_store_get_hostname(h, buf, sizeof buf), -1);
    CHECK_EQ(mooncake_store_remove(h, "k", 1), -1);
    CHECK_EQ(mooncake_store_remove_by_regex(h, ".*", 1), -1);
    CHECK_EQ(mooncake_store_remove_all(h, 1), -1);
    CHECK_EQ(mooncake_store_register_buffer(h, buf, sizeof buf), -1);
    CHECK_EQ(mooncake_store_unregister_buffer(h, buf), -1);
    size_t one = 1;
    mooncake_range_t range = {0, 0, 1};
    CHECK_EQ(mooncake_store_get_into_ranges(h, bufs, &one, 1, KEYS2, &one, &range, lres), -1);
    CHECK(lres[0] == 7 && lres[1] == 7);
    CHECK_EQ(mooncake_store_batch_replica_clear(h, KEYS2, 2, NULL, ires), -1);
    CHECK(ires[0] == 7 && ires[1] == 7);
}

/* A created handle that is not (or could not be) set up. */
static void test_not_set_up(mooncake_store_t s) {
    char buf[64];
    int ires[2] = {7, 7};
    int64_t lres[2] = {7, 7};
    void *bufs[2] = {buf, buf};
    size_t sizes[2] = {1, 1};
    CHECK_EQ(mooncake_store_health_check(s), 1);
    CHECK_EQ(mooncake_store_put(s, "k", "v", 1, NULL), -600);
    CHECK_EQ(mooncake_store_put_from(s, "k", buf, 1, NULL), -600);
    CHECK_EQ(mooncake_store_batch_put_from(s, KEYS2, bufs, sizes, 2, NULL, ires), 0);
    CHECK(ires[0] == -600 && ires[1] == -600);
    CHECK_EQ(mooncake_store_get_into(s, "k", buf, sizeof buf), -600);
    CHECK_EQ(mooncake_store_batch_get_into(s, KEYS2, bufs, sizes, 2, lres), 0);
    CHECK(lres[0] == -600 && lres[1] == -600);
    CHECK_EQ(mooncake_store_is_exist(s, "k"), -600);
    CHECK_EQ(mooncake_store_batch_is_exist(s, KEYS2, 2, ires), 0);
    CHECK(ires[0] == -600 && ires[1] == -600);
    CHECK_EQ(mooncake_store_get_size(s, "k"), -600);
    CHECK_EQ(mooncake_store_remove(s, "k", 0), -600);
    CHECK_EQ(mooncake_store_remove_by_regex(s, "k", 0), -600);
    CHECK_EQ(mooncake_store_remove_all(s, 0), -600);
    CHECK_EQ(mooncake_store_register_buffer(s, buf, sizeof buf), -600);
    CHECK_EQ(mooncake_store_unregister_buffer(s, buf), -600);
    memset(buf, 'x', sizeof buf);
    CHECK_EQ(mooncake_store_get_hostname(s, buf, sizeof buf), 0);
    CHECK_EQ(buf[0], '\0');
    CHECK_EQ(mooncake_store_get_hostname(s, buf, 1), 0);
    size_t two = 2, counts[2] = {1, 1};
    mooncake_range_t ranges[2] = {{0, 0, 1}, {1, 0, 1}};
    lres[0] = lres[1] = 7;
    CHECK_EQ(mooncake_store_get_into_ranges(s, bufs, &two, 1, KEYS2, counts, ranges, lres), 0);
    CHECK(lres[0] == -600 && lres[1] == -600);
    ires[0] = ires[1] = 7;
    CHECK_EQ(mooncake_store_batch_replica_clear(s, KEYS2, 2, "", ires), -600);
    CHECK(ires[0] == 0 && ires[1] == 0);
}

/* Shim validation: -1 before anything else, whatever the handle's state. */
static void test_argument_checks(mooncake_store_t s) {
    char buf[16];
    int ires[2] = {7, 7};
    int64_t lres[2] = {7, 7};
    void *bufs[2] = {buf, buf};
    void *null_bufs[2] = {buf, NULL};
    size_t sizes[2] = {1, 1};
    const char *null_keys[2] = {"k1", NULL};
    CHECK_EQ(mooncake_store_put(s, NULL, "v", 1, NULL), -1);
    CHECK_EQ(mooncake_store_put(s, "k", NULL, 1, NULL), -1);
    CHECK_EQ(mooncake_store_put_from(s, NULL, buf, 1, NULL), -1);
    CHECK_EQ(mooncake_store_put_from(s, "k", NULL, 1, NULL), -1);
    CHECK_EQ(mooncake_store_batch_put_from(s, NULL, bufs, sizes, 2, NULL, ires), -1);
    CHECK_EQ(mooncake_store_batch_put_from(s, KEYS2, NULL, sizes, 2, NULL, ires), -1);
    CHECK_EQ(mooncake_store_batch_put_from(s, KEYS2, bufs, NULL, 2, NULL, ires), -1);
    CHECK_EQ(mooncake_store_batch_put_from(s, KEYS2, bufs, sizes, 2, NULL, NULL), -1);
    CHECK_EQ(mooncake_store_batch_put_from(s, null_keys, bufs, sizes, 2, NULL, ires), -1);
    CHECK_EQ(mooncake_store_batch_put_from(s, KEYS2, null_bufs, sizes, 2, NULL, ires), -1);
    CHECK_EQ(mooncake_store_batch_put_from(s, NULL, NULL, NULL, 0, NULL, ires), -1);
    CHECK(ires[0] == 7 && ires[1] == 7);
    CHECK_EQ(mooncake_store_get_into(s, NULL, buf, 1), -1);
    CHECK_EQ(mooncake_store_get_into(s, "k", NULL, 1), -1);
    CHECK_EQ(mooncake_store_batch_get_into(s, NULL, bufs, sizes, 2, lres), -1);
    CHECK_EQ(mooncake_store_batch_get_into(s, KEYS2, bufs, sizes, 2, NULL), -1);
    CHECK_EQ(mooncake_store_batch_get_into(s, null_keys, bufs, sizes, 2, lres), -1);
    CHECK_EQ(mooncake_store_batch_get_into(s, KEYS2, null_bufs, sizes, 2, lres), -1);
    CHECK(lres[0] == 7 && lres[1] == 7);
    CHECK_EQ(mooncake_store_is_exist(s, NULL), -1);
    CHECK_EQ(mooncake_store_batch_is_exist(s, NULL, 2, ires), -1);
    CHECK_EQ(mooncake_store_batch_is_exist(s, KEYS2, 2, NULL), -1);
    CHECK_EQ(mooncake_store_batch_is_exist(s, null_keys, 2, ires), -1);
    CHECK_EQ(mooncake_store_get_size(s, NULL), -1);
    CHECK_EQ(mooncake_store_get_hostname(s, NULL, 16), -1);
    CHECK_EQ(mooncake_store_get_hostname(s, buf, 0), -1);
    CHECK_EQ(mooncake_store_remove(s, NULL, 1), -1);
    CHECK_EQ(mooncake_store_remove_by_regex(s, NULL, 1), -1);
    CHECK_EQ(mooncake_store_register_buffer(s, NULL, 16), -1);
    CHECK_EQ(mooncake_store_register_buffer(s, buf, 0), -1);
    CHECK(strstr(mooncake_last_error_message(), "mooncake_store_register_buffer") != NULL);
    size_t one = 1, two = 2, huge[2] = {SIZE_MAX, 2};
    mooncake_range_t range = {0, 0, 1};
    CHECK_EQ(mooncake_store_get_into_ranges(s, NULL, &one, 1, KEYS2, &one, &range, lres), -1);
    CHECK_EQ(mooncake_store_get_into_ranges(s, bufs, NULL, 1, KEYS2, &one, &range, lres), -1);
    CHECK_EQ(mooncake_store_get_into_ranges(s, bufs, &one, 1, NULL, &one, &range, lres), -1);
    CHECK_EQ(mooncake_store_get_into_ranges(s, bufs, &one, 1, null_keys + 1, &one, &range, lres),
             -1);
    CHECK_EQ(mooncake_store_get_into_ranges(s, bufs, &one, 1, KEYS2, NULL, &range, lres), -1);
    CHECK_EQ(mooncake_store_get_into_ranges(s, bufs, &one, 1, KEYS2, &one, NULL, lres), -1);
    CHECK_EQ(mooncake_store_get_into_ranges(s, bufs, &one, 1, KEYS2, &one, &range, NULL), -1);
    CHECK_EQ(mooncake_store_get_into_ranges(s, bufs, huge, 2, KEYS2, &two, &range, lres), -1);
    CHECK(lres[0] == 7 && lres[1] == 7);
    /* Nothing to read: no array is needed. */
    CHECK_EQ(mooncake_store_get_into_ranges(s, NULL, NULL, 0, NULL, NULL, NULL, NULL), 0);
    CHECK_EQ(mooncake_store_batch_replica_clear(s, NULL, 2, NULL, ires), -1);
    CHECK_EQ(mooncake_store_batch_replica_clear(s, null_keys, 2, NULL, ires), -1);
    CHECK_EQ(mooncake_store_batch_replica_clear(s, KEYS2, 2, NULL, NULL), -1);
    CHECK(ires[0] == 7 && ires[1] == 7);
}

/* The thread's last error comes from `function` and names `cause`. */
static void check_last_error(const char *function, const char *cause) {
    CHECK(strcmp(mooncake_last_error_function(), function) == 0);
    CHECK(strstr(mooncake_last_error_message(), cause) != NULL);
}

/* Setup failures return promptly with upstream's codes and leave the handle usable;
 * the thread's last error says why. */
static void test_setup_failures(mooncake_store_t s) {
    CHECK_EQ(mooncake_store_setup(s, NULL, "P2PHANDSHAKE", 0, 0, NULL, NULL, "127.0.0.1:1"),
             -600);
    CHECK_EQ(mooncake_store_setup(s, "", "P2PHANDSHAKE", 0, 0, "tcp", "", "127.0.0.1:1"), -600);
    CHECK_EQ(mooncake_store_setup(s, "127.0.0.1", "P2PHANDSHAKE", 0, 0, "bogus", "",
                                  "127.0.0.1:1"),
             -600);
    check_last_error("mooncake_store_setup", "bogus");
    /* Nothing listens on port 1: an explicit port gives -600, an auto port -1. */
    double t0 = now_seconds();
    CHECK_EQ(mooncake_store_setup(s, "127.0.0.1:12999", "P2PHANDSHAKE", 1 << 20, 1 << 20,
                                  "tcp", "", "127.0.0.1:1"),
             -600);
    CHECK_EQ(mooncake_store_setup(s, "127.0.0.1", "P2PHANDSHAKE", 1 << 20, 1 << 20, "tcp", "",
                                  "127.0.0.1:1"),
             -1);
    CHECK_EQ(mooncake_store_setup(s, "127.0.0.1", "etcd://127.0.0.1:1", 0, 0, "tcp", "",
                                  "127.0.0.1:1"),
             -1);
    check_last_error("mooncake_store_setup", "127.0.0.1:1");
    /* Legacy init: no master at 127.0.0.1:50051. */
    CHECK_EQ(mooncake_store_init_all(s, NULL, NULL, 1 << 20), -600);
    CHECK(now_seconds() - t0 < 30.0);
    test_not_set_up(s);
}

/* Allocator for mooncake_store_get_with_allocator: malloc, remembering the request. */
struct alloc_log {
    uint64_t asked;
    void *given;
    int calls;
};

static void *log_malloc(void *ctx, uint64_t size) {
    struct alloc_log *log = ctx;
    log->calls++;
    log->asked = size;
    log->given = malloc(size ? size : 1);
    return log->given;
}

static void *refuse(void *ctx, uint64_t size) {
    (void)size;
    ((struct alloc_log *)ctx)->calls++;
    return NULL;
}

/* mooncake_ext.h whole-object reads: into the caller's memory and into library
 * buffers (reused across calls, double free refused). `obj` holds `n` bytes of `src`. */
static void test_whole_object_reads(mooncake_store_t s, const unsigned char *src, size_t n) {
    struct alloc_log log = {0, NULL, 0};
    CHECK_EQ(mooncake_store_get_with_allocator(s, "obj", log_malloc, &log), (int64_t)n);
    CHECK_EQ(log.calls, 1);
    CHECK_EQ(log.asked, (uint64_t)n);
    CHECK(log.given && memcmp(log.given, src, n) == 0);
    free(log.given);
    log.calls = 0;
    CHECK_EQ(mooncake_store_get_with_allocator(s, "missing", log_malloc, &log), -704);
    CHECK_EQ(log.calls, 0);
    CHECK_EQ(mooncake_store_get_with_allocator(s, "obj", refuse, &log), -600);
    CHECK_EQ(log.calls, 1);
    CHECK_EQ(mooncake_store_get_with_allocator(s, "obj", NULL, NULL), -1);
    CHECK_EQ(mooncake_store_get_with_allocator(s, NULL, log_malloc, &log), -1);
    CHECK_EQ(mooncake_store_get_with_allocator(NULL, "obj", log_malloc, &log), -1);

    const char *keys[2] = {"obj", "missing"};
    void *bufs[2] = {(void *)1, (void *)1};
    int64_t res[2] = {7, 7};
    CHECK_EQ(mooncake_store_batch_get_buffers(s, keys, 2, bufs, res), 0);
    CHECK_EQ(res[0], (int64_t)n);
    CHECK(bufs[0] && memcmp(bufs[0], src, n) == 0);
    CHECK_EQ(res[1], -704);
    CHECK(bufs[1] == NULL);
    void *first = bufs[0];
    mooncake_store_free_buffer(first);
    mooncake_store_free_buffer(NULL);
    CHECK_EQ(mooncake_store_batch_get_buffers(s, keys, 1, bufs, res), 0);
    CHECK_EQ(res[0], (int64_t)n);
    CHECK(bufs[0] && memcmp(bufs[0], src, n) == 0);
    mooncake_store_free_buffer(bufs[0]);
}

/* mooncake_ext.h ranged reads into registered buffers, and replica clearing (only
 * the caller's objects whose read leases expired). `obj` holds the first
 * (3 << 20) + 17 bytes of `src`; `a` is named `name_a`. */
static void test_ranges_and_replica_clear(mooncake_store_t a, mooncake_store_t b,
                                          const char *name_a, const unsigned char *src) {
    unsigned char x[64], y[64];
    memset(x, 0, sizeof x);
    memset(y, 0, sizeof y);
    REQUIRE(mooncake_store_register_buffer(b, x, sizeof x) == 0);
    /* x: two ranges of obj and one of a missing key; y (not registered): one range. */
    void *bufs[2] = {x, y};
    size_t key_counts[2] = {2, 1};
    const char *keys[3] = {"obj", "missing", "obj"};
    size_t range_counts[3] = {2, 1, 1};
    mooncake_range_t ranges[4] = {
        {0, 1000, 16}, {32, (3 << 20) + 1, 16}, {16, 0, 4}, {0, 0, 8}};
    int64_t res[4] = {7, 7, 7, 7};
    CHECK_EQ(mooncake_store_get_into_ranges(b, bufs, key_counts, 2, keys, range_counts, ranges,
                                            res),
             0);
    CHECK_EQ(res[0], 16);
    CHECK_EQ(res[1], 16);
    CHECK_EQ(res[2], -704);
    CHECK_EQ(res[3], -600);
    CHECK(memcmp(x, src + 1000, 16) == 0 && memcmp(x + 32, src + (3 << 20) + 1, 16) == 0);
    /* Past the buffer, past the object. */
    mooncake_range_t bad[2] = {{60, 0, 8}, {0, (3 << 20) + 10, 8}};
    size_t two = 2, one = 1;
    CHECK_EQ(mooncake_store_get_into_ranges(b, bufs, &one, 1, keys, &two, bad, res), 0);
    CHECK(res[0] == -600 && res[1] == -600);
    CHECK_EQ(mooncake_store_unregister_buffer(b, x), 0);

    /* a's own objects whose read leases have expired (none was read). */
    const char *pref[1] = {name_a};
    mooncake_replicate_config_t own = {1, 0, 0, pref, 1};
    CHECK_EQ(mooncake_store_put(a, "rc1", src, 100, &own), 0);
    CHECK_EQ(mooncake_store_put(a, "rc2", src, 100, &own), 0);
    CHECK_EQ(mooncake_store_put(b, "rcb", src, 100, &own), 0); /* b's, on a's segment */
    const char *ckeys[4] = {"rc1", "rcb", "nope", "rc1"};
    int cleared[4] = {7, 7, 7, 7};
    CHECK_EQ(mooncake_store_batch_replica_clear(a, ckeys, 4, NULL, cleared), 0);
    CHECK(cleared[0] == 1 && cleared[1] == 0 && cleared[2] == 0 && cleared[3] == 0);
    CHECK_EQ(mooncake_store_is_exist(a, "rc1"), 0);
    const char *rc2[1] = {"rc2"};
    CHECK_EQ(mooncake_store_batch_replica_clear(a, rc2, 1, "elsewhere:1", cleared), 0);
    CHECK_EQ(cleared[0], 0);
    CHECK_EQ(mooncake_store_batch_replica_clear(a, rc2, 1, name_a, cleared), 0);
    CHECK_EQ(cleared[0], 1);
    CHECK_EQ(mooncake_store_remove(b, "rcb", 1), 0);
}

static mooncake_store_t setup_store(const char *master, uint64_t segment) {
    mooncake_store_t s = mooncake_store_create();
    REQUIRE(s != NULL);
    REQUIRE(mooncake_store_setup(s, "127.0.0.1", "P2PHANDSHAKE", segment, 16 << 20, "tcp", "",
                                 master) == 0);
    return s;
}

static void test_with_master(const char *master) {
    mooncake_store_t a = setup_store(master, 32 << 20);
    mooncake_store_t b = setup_store(master, 32 << 20);
    char name_a[128], name_b[128];
    CHECK_EQ(mooncake_store_get_hostname(a, name_a, sizeof name_a), 0);
    CHECK_EQ(mooncake_store_get_hostname(b, name_b, sizeof name_b), 0);
    CHECK(strncmp(name_a, "127.0.0.1:", 10) == 0);
    CHECK(strcmp(name_a, name_b) != 0);
    char scratch[128];
    CHECK_EQ(mooncake_store_get_hostname(a, scratch, strlen(name_a)), -1); /* no room for NUL */
    CHECK_EQ(mooncake_store_health_check(a), 0);
    CHECK_EQ(mooncake_store_setup(a, "127.0.0.1", "P2PHANDSHAKE", 0, 0, "tcp", "", master),
             -600); /* already set up */
    /* An unusable SSD offload directory: -600, and the last error names it. */
    mooncake_store_t c = mooncake_store_create();
    REQUIRE(c != NULL);
    CHECK_EQ(mooncake_store_setup_with_offload(c, "127.0.0.1", "P2PHANDSHAKE", 0, 0, "tcp", "",
                                               master, true, "relative/ssd", NULL),
             -600);
    check_last_error("mooncake_store_setup_with_offload", "relative/ssd: not an absolute path");
    mooncake_store_destroy(c);
    mooncake_store_remove_all(a, 1);

    size_t n = (3 << 20) + 17;
    unsigned char *src = malloc(n), *dst = malloc(n);
    REQUIRE(src && dst);
    fill_pattern(src, n, 3);
    /* Placed on b's segment, written by a, read back by both. */
    const char *pref[2] = {NULL, name_b};
    mooncake_replicate_config_t cfg = {1, 0, 0, pref, 2};
    CHECK_EQ(mooncake_store_put(a, "obj", src, n, &cfg), 0);
    memset(dst, 0, n);
    CHECK_EQ(mooncake_store_get_into(a, "obj", dst, n), (int64_t)n);
    CHECK(memcmp(src, dst, n) == 0);
    memset(dst, 0, n);
    CHECK_EQ(mooncake_store_get_into(b, "obj", dst, n + 100), (int64_t)n);
    CHECK(memcmp(src, dst, n) == 0);
    CHECK_EQ(mooncake_store_get_into(b, "obj", dst, n - 1), -600);
    CHECK_EQ(mooncake_store_get_size(b, "obj"), (int64_t)n);
    CHECK_EQ(mooncake_store_is_exist(b, "obj"), 1);
    CHECK_EQ(mooncake_store_is_exist(b, "missing"), 0);
    CHECK_EQ(mooncake_store_get_into(b, "missing", dst, n), -704);
    CHECK_EQ(mooncake_store_get_size(b, "missing"), -704);
    test_whole_object_reads(a, src, n);
    test_whole_object_reads(b, src, n);
    /* Existing key: success, old value kept. */
    fill_pattern(dst, n, 9);
    CHECK_EQ(mooncake_store_put_from(b, "obj", dst, n, NULL), 0);
    CHECK_EQ(mooncake_store_get_into(a, "obj", dst, n), (int64_t)n);
    CHECK(memcmp(src, dst, n) == 0);
    CHECK_EQ(mooncake_store_put(a, "empty", src, 0, NULL), -600);
    CHECK_EQ(mooncake_store_put_from(a, "empty", NULL, 0, NULL), 0);
    CHECK_EQ(mooncake_store_is_exist(a, "empty"), 0);
    /* Larger than the 16 MiB local buffer: -600 (put_from has no such limit). */
    size_t big_n = (size_t)17 << 20;
    unsigned char *big = calloc(big_n, 1);
    REQUIRE(big != NULL);
    CHECK_EQ(mooncake_store_put(a, "huge", big, big_n, NULL), -600);
    free(big);

    /* Batches, with per-item codes. */
    const char *keys[3] = {"b1", "b2", "b1"};
    void *bufs[3] = {src, src + 100, src + 200};
    size_t sizes[3] = {100, 200, 300};
    int ires[3] = {7, 7, 7};
    CHECK_EQ(mooncake_store_batch_put_from(a, keys, bufs, sizes, 3, NULL, ires), 0);
    CHECK(ires[0] == 0 && ires[1] == 0 && ires[2] == 0);
    const char *gkeys[3] = {"b1", "b2", "nope"};
    unsigned char g1[300], g2[100], g3[8];
    void *gbufs[3] = {g1, g2, g3};
    size_t gsizes[3] = {sizeof g1, sizeof g2, sizeof g3};
    int64_t lres[3] = {7, 7, 7};
    CHECK_EQ(mooncake_store_batch_get_into(b, gkeys, gbufs, gsizes, 3, lres), 0);
    CHECK_EQ(lres[0], 300); /* duplicate key: the last buffer wins */
    CHECK(memcmp(g1, src + 200, 300) == 0);
    CHECK_EQ(lres[1], -600); /* 200 bytes do not fit in 100 */
    CHECK_EQ(lres[2], -704);
    CHECK_EQ(mooncake_store_batch_is_exist(b, gkeys, 3, ires), 0);
    CHECK(ires[0] == 1 && ires[1] == 1 && ires[2] == 0);

    test_ranges_and_replica_clear(a, b, name_a, src);

    /* Removal: leased objects need force. */
    CHECK_EQ(mooncake_store_remove(a, "b2", 0), -706);
    CHECK_EQ(mooncake_store_remove(a, "b2", 1), 0);
    CHECK_EQ(mooncake_store_remove(a, "b2", 1), -704);
    CHECK_EQ(mooncake_store_remove_by_regex(a, "^b", 1), 1);
    CHECK_EQ(mooncake_store_remove_by_regex(a, "(", 1), -600);
    CHECK_EQ(mooncake_store_remove_all(b, 1), 1); /* "obj" */

    /* Buffer registration. */
    CHECK_EQ(mooncake_store_register_buffer(a, src, n), 0);
    CHECK_EQ(mooncake_store_register_buffer(a, src + 10, 10), -600); /* overlap */
    CHECK_EQ(mooncake_store_put_from(a, "reg", src, n, NULL), 0);
    CHECK_EQ(mooncake_store_unregister_buffer(a, src), 0);
    CHECK_EQ(mooncake_store_unregister_buffer(a, src), -600);
    CHECK_EQ(mooncake_store_unregister_buffer(a, NULL), -600);

    mooncake_store_destroy(a);
    CHECK_EQ(mooncake_store_health_check(a), -1);
    CHECK_EQ(mooncake_store_put(a, "k", src, 1, NULL), -1);
    mooncake_store_destroy(b);
    free(src);
    free(dst);
}

int main(void) {
    test_bad_handles(NULL);
    test_bad_handles(BOGUS_STORE);
    /* A transfer engine handle is not a store. */
    transfer_engine_t e = p2p_engine(0);
    REQUIRE(e != NULL);
    test_bad_handles((mooncake_store_t)e);
    destroyTransferEngine(e);

    mooncake_store_t s = mooncake_store_create();
    REQUIRE(s != NULL);
    test_not_set_up(s);
    test_argument_checks(s);
    test_setup_failures(s);
    mooncake_store_destroy(s);
    test_bad_handles(s);

    const char *master = getenv("MOONCAKE_TEST_MASTER");
    if (master && *master) {
        test_with_master(master);
    } else {
        printf("MOONCAKE_TEST_MASTER not set: skipping the tests that need a master\n");
    }
    return test_summary("store_api");
}
