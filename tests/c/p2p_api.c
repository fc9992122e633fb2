/* The P2P Store's C API (mooncake_p2p_* in mooncake_ext.h): first every NULL, bad
 * handle and bad argument path (each returns its documented value and sets the
 * thread's last error), then -- with MOONCAKE_TEST_METADATA_URL naming our HTTP
 * metadata server -- two nodes in this process: one with an engine of its own, one on
 * an engine made with createTransferEngine. An object registered from this program's
 * memory (3 MiB + 17 bytes in two buffers, 256 KiB shards) is fetched into another
 * buffer and compared, listed and discovered as JSON, fetched again from a named peer
 * resuming by checksum, withdrawn; bytes are put and got; an agent fetches a copy on
 * request (replicate_to); destroying the nodes withdraws everything. */
#include "test_common.h"

#include "mooncake/store_c.h"

#include <errno.h>

#define BOGUS ((mooncake_p2p_t)(uintptr_t)0x12345678u)

/* The thread's last error comes from `function` and names `cause`. */
static int last_error_is(const char *function, const char *cause) {
    return strcmp(mooncake_last_error_function(), function) == 0 &&
           strstr(mooncake_last_error_message(), cause) != NULL;
}

/* Every function refuses handle `h` (NULL, unknown, or another table's) with -1 and
 * says so in the last error. */
static void test_bad_handle(mooncake_p2p_t h) {
    char buf[64] = "untouched";
    uint64_t addr = (uint64_t)(uintptr_t)buf, size = sizeof buf, kept = 7, fetched = 7;
    mooncake_p2p_destroy(h); /* a no-op */
    CHECK(last_error_is("mooncake_p2p_destroy", "P2P store handle"));
    CHECK_EQ(mooncake_last_error_errno(), EBADF);
    CHECK_EQ(mooncake_p2p_local_server_name(h, buf, sizeof buf), -1);
    CHECK(last_error_is("mooncake_p2p_local_server_name", "P2P store handle"));
    CHECK_EQ(mooncake_p2p_register(h, "o", &addr, &size, 1, 4096, NULL, 0), -1);
    CHECK(last_error_is("mooncake_p2p_register", "P2P store handle"));
    CHECK_EQ(mooncake_p2p_unregister(h, "o"), -1);
    CHECK(last_error_is("mooncake_p2p_unregister", "P2P store handle"));
    CHECK_EQ(mooncake_p2p_delete_replica(h, "o"), -1);
    CHECK(last_error_is("mooncake_p2p_delete_replica", "P2P store handle"));
    CHECK_EQ(mooncake_p2p_get_replica(h, "o", &addr, &size, 1), -1);
    CHECK(last_error_is("mooncake_p2p_get_replica", "P2P store handle"));
    CHECK_EQ(mooncake_p2p_get_replica_ex(h, "o", &addr, &size, 1, NULL, 0, 0, &kept, &fetched),
             -1);
    CHECK(last_error_is("mooncake_p2p_get_replica_ex", "P2P store handle"));
    CHECK(kept == 7 && fetched == 7);
    CHECK_EQ(mooncake_p2p_size(h, "o"), -1);
    CHECK(last_error_is("mooncake_p2p_size", "P2P store handle"));
    CHECK_EQ(mooncake_p2p_put(h, "o", buf, 1), -1);
    CHECK(last_error_is("mooncake_p2p_put", "P2P store handle"));
    CHECK_EQ(mooncake_p2p_get(h, "o", buf, sizeof buf), -1);
    CHECK(last_error_is("mooncake_p2p_get", "P2P store handle"));
    CHECK_EQ(mooncake_p2p_list(h, "", buf, sizeof buf), -1);
    CHECK(last_error_is("mooncake_p2p_list", "P2P store handle"));
    CHECK_EQ(mooncake_p2p_discover_peers(h, "", buf, sizeof buf), -1);
    CHECK(last_error_is("mooncake_p2p_discover_peers", "P2P store handle"));
    CHECK_EQ(mooncake_p2p_replicate_to(h, "o", "peer"), -1);
    CHECK(last_error_is("mooncake_p2p_replicate_to", "P2P store handle"));
    CHECK_EQ(mooncake_p2p_start_agent(h, NULL, buf, sizeof buf), -1);
    CHECK(last_error_is("mooncake_p2p_start_agent", "P2P store handle"));
    CHECK(strcmp(buf, "untouched") == 0);
}

/* Creation failures return NULL promptly with the cause; handles of the other tables
 * are never taken for a P2P node, nor the reverse. */
static void test_create_and_handles(void) {
    CHECK(mooncake_p2p_create(NULL, "127.0.0.1:1", NULL) == NULL);
    CHECK(last_error_is("mooncake_p2p_create", "metadata is NULL"));
    CHECK_EQ(mooncake_last_error_errno(), EINVAL);
    CHECK(mooncake_p2p_create("http://127.0.0.1:1/metadata", NULL, "") == NULL);
    CHECK(last_error_is("mooncake_p2p_create", "local_server_name is NULL"));
    CHECK(mooncake_p2p_create("zookeeper://h:1", "127.0.0.1:1", NULL) == NULL);
    CHECK(last_error_is("mooncake_p2p_create", "zookeeper"));
    /* P2PHANDSHAKE has no store to keep payloads in. */
    CHECK(mooncake_p2p_create("P2PHANDSHAKE", "127.0.0.1", NULL) == NULL);
    CHECK(last_error_is("mooncake_p2p_create", "P2PHANDSHAKE"));
    CHECK(mooncake_p2p_create_on_engine(NULL, "http://127.0.0.1:1/metadata") == NULL);
    CHECK(last_error_is("mooncake_p2p_create_on_engine", "engine handle is NULL"));
    CHECK(mooncake_p2p_create_on_engine((transfer_engine_t)BOGUS, "x") == NULL);
    CHECK(last_error_is("mooncake_p2p_create_on_engine", "engine handle"));
    CHECK_EQ(mooncake_last_error_errno(), EBADF);
    transfer_engine_t engine = p2p_engine(0);
    REQUIRE(engine != NULL);
    CHECK(mooncake_p2p_create_on_engine(engine, NULL) == NULL);
    CHECK(last_error_is("mooncake_p2p_create_on_engine", "metadata is NULL"));
    CHECK(mooncake_p2p_create_on_engine(engine, "P2PHANDSHAKE") == NULL);
    CHECK(last_error_is("mooncake_p2p_create_on_engine", "P2PHANDSHAKE"));
    /* An engine and a store are not P2P nodes. */
    test_bad_handle((mooncake_p2p_t)engine);
    mooncake_store_t store = mooncake_store_create();
    REQUIRE(store != NULL);
    test_bad_handle((mooncake_p2p_t)store);
    mooncake_store_destroy(store);
    destroyTransferEngine(engine);
    test_bad_handle(NULL);
    CHECK(strstr(mooncake_last_error_message(), "is NULL") != NULL);
    test_bad_handle(BOGUS);
    CHECK(strstr(mooncake_last_error_message(), "is not a live P2P store") != NULL);
}

/* Argument checks on a live node: -1 (EINVAL) before anything is read. */
static void test_arguments(mooncake_p2p_t p) {
    char buf[16] = "untouched";
    uint64_t addr = (uint64_t)(uintptr_t)buf, size = sizeof buf, zero = 0;
    const char *null_peer[1] = {NULL};
    CHECK_EQ(mooncake_p2p_local_server_name(p, NULL, 64), -1);
    CHECK(last_error_is("mooncake_p2p_local_server_name", "buf is NULL"));
    CHECK_EQ(mooncake_p2p_local_server_name(p, buf, 4), -1);
    CHECK(last_error_is("mooncake_p2p_local_server_name", "needs"));
    CHECK_EQ(mooncake_last_error_errno(), ERANGE);
    CHECK(strcmp(buf, "untouched") == 0);
    CHECK_EQ(mooncake_p2p_register(p, NULL, &addr, &size, 1, 4096, NULL, 0), -1);
    CHECK(last_error_is("mooncake_p2p_register", "name is NULL"));
    CHECK_EQ(mooncake_p2p_register(p, "o", NULL, &size, 1, 4096, NULL, 0), -1);
    CHECK(last_error_is("mooncake_p2p_register", "addrs is NULL"));
    CHECK_EQ(mooncake_p2p_register(p, "o", &addr, NULL, 1, 4096, NULL, 0), -1);
    CHECK(last_error_is("mooncake_p2p_register", "sizes is NULL"));
    CHECK_EQ(mooncake_p2p_register(p, "o", &addr, &size, SIZE_MAX, 4096, NULL, 0), -1);
    CHECK(last_error_is("mooncake_p2p_register", "larger than any array"));
    CHECK_EQ(mooncake_p2p_register(p, "o", NULL, NULL, 0, 4096, NULL, 0), MOONCAKE_P2P_INVALID_ARGUMENT);
    CHECK(last_error_is("mooncake_p2p_register", "no buffers"));
    CHECK_EQ(mooncake_p2p_register(p, "o", &addr, &size, 1, 0, NULL, 0), -1);
    CHECK(last_error_is("mooncake_p2p_register", "shard size of 0"));
    CHECK_EQ(mooncake_p2p_register(p, "o", &zero, &size, 1, 4096, NULL, 0), -1);
    CHECK(last_error_is("mooncake_p2p_register", "buffer 0 is NULL or empty"));
    CHECK_EQ(mooncake_p2p_register(p, "", &addr, &size, 1, 4096, NULL, 0), -1);
    CHECK(last_error_is("mooncake_p2p_register", "name is empty"));
    CHECK_EQ(mooncake_p2p_unregister(p, NULL), -1);
    CHECK(last_error_is("mooncake_p2p_unregister", "name is NULL"));
    CHECK_EQ(mooncake_p2p_delete_replica(p, NULL), -1);
    CHECK(last_error_is("mooncake_p2p_delete_replica", "name is NULL"));
    CHECK_EQ(mooncake_p2p_get_replica(p, NULL, &addr, &size, 1), -1);
    CHECK_EQ(mooncake_p2p_get_replica(p, "o", NULL, &size, 1), -1);
    CHECK(last_error_is("mooncake_p2p_get_replica", "addrs is NULL"));
    CHECK_EQ(mooncake_p2p_get_replica_ex(p, "o", &addr, &size, 1, NULL, 1, 0, NULL, NULL), -1);
    CHECK(last_error_is("mooncake_p2p_get_replica_ex", "peers is NULL"));
    CHECK_EQ(mooncake_p2p_get_replica_ex(p, "o", &addr, &size, 1, null_peer, 1, 0, NULL, NULL),
             -1);
    CHECK(last_error_is("mooncake_p2p_get_replica_ex", "peers[0] is NULL"));
    CHECK_EQ(mooncake_p2p_size(p, NULL), -1);
    CHECK(last_error_is("mooncake_p2p_size", "name is NULL"));
    CHECK_EQ(mooncake_p2p_put(p, NULL, buf, 1), -1);
    CHECK_EQ(mooncake_p2p_put(p, "o", NULL, 1), -1);
    CHECK(last_error_is("mooncake_p2p_put", "data is NULL"));
    CHECK_EQ(mooncake_p2p_put(p, "o", buf, 0), MOONCAKE_P2P_INVALID_ARGUMENT);
    CHECK(last_error_is("mooncake_p2p_put", "no bytes"));
    CHECK_EQ(mooncake_p2p_get(p, NULL, buf, sizeof buf), -1);
    CHECK_EQ(mooncake_p2p_get(p, "o", NULL, 1), -1);
    CHECK(last_error_is("mooncake_p2p_get", "buf is NULL"));
    CHECK_EQ(mooncake_p2p_list(p, NULL, NULL, 1), -1);
    CHECK(last_error_is("mooncake_p2p_list", "buf is NULL"));
    CHECK_EQ(mooncake_p2p_discover_peers(p, NULL, NULL, 1), -1);
    CHECK(last_error_is("mooncake_p2p_discover_peers", "buf is NULL"));
    CHECK_EQ(mooncake_p2p_replicate_to(p, NULL, "peer"), -1);
    CHECK_EQ(mooncake_p2p_replicate_to(p, "o", NULL), -1);
    CHECK(last_error_is("mooncake_p2p_replicate_to", "peer is NULL"));
    CHECK_EQ(mooncake_p2p_replicate_to(p, "o", "127.0.0.1:9"), -1);
    CHECK(last_error_is("mooncake_p2p_replicate_to", "runs no agent"));
    CHECK_EQ(mooncake_p2p_start_agent(p, "not an address", NULL, 0), -1);
    CHECK(last_error_is("mooncake_p2p_start_agent", "not ip:port"));
    CHECK(strcmp(buf, "untouched") == 0);
}

/* The JSON of a list or discover_peers call, in a buffer of its own (freed by the
 * caller); checks the snprintf-like contract on the way. */
static char *json_of(int64_t (*fn)(mooncake_p2p_t, const char *, char *, size_t),
                     mooncake_p2p_t p, const char *prefix) {
    int64_t n = fn(p, prefix, NULL, 0);
    REQUIRE(n > 0);
    char small[8];
    memset(small, 'x', sizeof small);
    CHECK_EQ(fn(p, prefix, small, sizeof small), n);
    CHECK_EQ(small[n < (int64_t)sizeof small ? n : (int64_t)sizeof small - 1], '\0');
    char *text = malloc((size_t)n + 1);
    REQUIRE(text != NULL);
    CHECK_EQ(fn(p, prefix, text, (size_t)n + 1), n);
    CHECK_EQ((int64_t)strlen(text), n);
    CHECK(strncmp(small, text, sizeof small - 1) == 0);
    return text;
}

#define SHARD (256u << 10)
#define FIRST (2u << 20)
#define SECOND ((1u << 20) + 17u)
#define TOTAL (FIRST + SECOND)

/* Registering from this program's memory, fetching into another buffer. */
static void test_objects(mooncake_p2p_t a, const char *name_a, mooncake_p2p_t b,
                         const char *name_b) {
    unsigned char *src = malloc(TOTAL);
    unsigned char *dst = malloc(TOTAL);
    REQUIRE(src != NULL && dst != NULL);
    fill_pattern(src, TOTAL, 5);
    memset(dst, 0, TOTAL);
    uint64_t addrs[2] = {(uint64_t)(uintptr_t)src, (uint64_t)(uintptr_t)(src + FIRST)};
    uint64_t sizes[2] = {FIRST, SECOND};
    CHECK_EQ(mooncake_p2p_register(a, "ckpt/c", addrs, sizes, 2, SHARD, "cpu:0", 0),
             MOONCAKE_P2P_OK);
    CHECK_EQ(mooncake_p2p_register(a, "ckpt/c", addrs, sizes, 2, SHARD, NULL, 1),
             MOONCAKE_P2P_ALREADY_HELD);
    CHECK_EQ(mooncake_p2p_size(b, "ckpt/c"), TOTAL);
    CHECK_EQ(mooncake_p2p_size(b, "ckpt/none"), MOONCAKE_P2P_NOT_FOUND);
    CHECK(last_error_is("mooncake_p2p_size", "ckpt/none"));

    /* A buffer too small, then one that does. */
    uint64_t dst_addr = (uint64_t)(uintptr_t)dst, short_size = TOTAL - 1, dst_size = TOTAL;
    CHECK_EQ(mooncake_p2p_get_replica(b, "ckpt/c", &dst_addr, &short_size, 1), -1);
    CHECK(last_error_is("mooncake_p2p_get_replica", "hold"));
    CHECK_EQ(mooncake_p2p_get_replica(b, "ckpt/none", &dst_addr, &dst_size, 1),
             MOONCAKE_P2P_NOT_FOUND);
    CHECK_EQ(mooncake_p2p_get_replica(b, "ckpt/c", &dst_addr, &dst_size, 1), MOONCAKE_P2P_OK);
    CHECK(memcmp(src, dst, TOTAL) == 0);
    CHECK_EQ(mooncake_p2p_get_replica(b, "ckpt/c", &dst_addr, &dst_size, 1),
             MOONCAKE_P2P_ALREADY_HELD);
    /* Held in the caller's memory (by both nodes): read it there. */
    char tiny[4];
    CHECK_EQ(mooncake_p2p_get(b, "ckpt/c", tiny, sizeof tiny), -1);
    CHECK_EQ(mooncake_last_error_errno(), ERANGE);
    unsigned char *other = malloc(TOTAL);
    REQUIRE(other != NULL);
    CHECK_EQ(mooncake_p2p_get(b, "ckpt/c", other, TOTAL), MOONCAKE_P2P_ALREADY_HELD);
    CHECK_EQ(mooncake_p2p_get(a, "ckpt/c", other, TOTAL), MOONCAKE_P2P_ALREADY_HELD);
    free(other);
    CHECK_EQ(mooncake_p2p_unregister(b, "ckpt/c"), MOONCAKE_P2P_NOT_HELD);
    CHECK_EQ(mooncake_p2p_delete_replica(a, "ckpt/c"), MOONCAKE_P2P_NOT_HELD);
    CHECK(last_error_is("mooncake_p2p_delete_replica", "ckpt/c"));

    char *list = json_of(mooncake_p2p_list, a, "ckpt/");
    CHECK(strstr(list, "\"name\":\"ckpt/c\"") != NULL);
    CHECK(strstr(list, "\"size\":3145745") != NULL);
    CHECK(strstr(list, "\"max_shard_size\":262144") != NULL);
    CHECK(strstr(list, "\"size_list\":[2097152,1048593]") != NULL);
    char holders[256];
    snprintf(holders, sizeof holders, "\"holders\":[\"%s\",\"%s\"]",
             strcmp(name_a, name_b) < 0 ? name_a : name_b,
             strcmp(name_a, name_b) < 0 ? name_b : name_a);
    CHECK(strstr(list, holders) != NULL);
    if (strstr(list, holders) == NULL) fprintf(stderr, "list: %s\n", list);
    free(list);
    list = json_of(mooncake_p2p_list, b, "nothing/");
    free(list);
    CHECK_EQ(mooncake_p2p_list(b, "nothing/", tiny, sizeof tiny), 2); /* "[]" */
    CHECK(strcmp(tiny, "[]") == 0);
    char *peers = json_of(mooncake_p2p_discover_peers, b, NULL);
    CHECK(strstr(peers, holders + strlen("\"holders\":")) != NULL);
    free(peers);

    /* Again from a named peer, keeping what the buffer already holds. */
    CHECK_EQ(mooncake_p2p_delete_replica(b, "ckpt/c"), MOONCAKE_P2P_OK);
    CHECK_EQ(mooncake_p2p_delete_replica(b, "ckpt/c"), MOONCAKE_P2P_NOT_HELD);
    const char *only_a[1] = {name_a};
    uint64_t kept = 7, fetched = 7;
    CHECK_EQ(mooncake_p2p_get_replica_ex(b, "ckpt/c", &dst_addr, &dst_size, 1, only_a, 1, 1,
                                         &kept, &fetched),
             MOONCAKE_P2P_OK);
    CHECK_EQ(kept, TOTAL);
    CHECK_EQ(fetched, 0);
    CHECK_EQ(mooncake_p2p_delete_replica(b, "ckpt/c"), MOONCAKE_P2P_OK);
    /* Nothing kept, and only a node that does not exist to ask. */
    const char *nobody[1] = {"127.0.0.1:9"};
    kept = fetched = 7;
    memset(dst, 0, TOTAL);
    CHECK_EQ(mooncake_p2p_get_replica_ex(b, "ckpt/c", &dst_addr, &dst_size, 1, nobody, 1, 0,
                                         &kept, &fetched),
             MOONCAKE_P2P_NO_SOURCE);
    CHECK(last_error_is("mooncake_p2p_get_replica_ex", "no source"));
    CHECK(kept == 7 && fetched == 7);
    CHECK_EQ(mooncake_p2p_get_replica_ex(b, "ckpt/c", &dst_addr, &dst_size, 1, NULL, 0, 0,
                                         &kept, &fetched),
             MOONCAKE_P2P_OK);
    CHECK_EQ(kept + fetched, TOTAL);
    CHECK(memcmp(src, dst, TOTAL) == 0);
    CHECK_EQ(mooncake_p2p_delete_replica(b, "ckpt/c"), MOONCAKE_P2P_OK);

    /* B may not register over A's object; A withdraws it and it is gone. */
    CHECK_EQ(mooncake_p2p_register(b, "ckpt/c", &dst_addr, &dst_size, 1, SHARD, NULL, 0),
             MOONCAKE_P2P_EXISTS);
    CHECK_EQ(mooncake_p2p_unregister(a, "ckpt/c"), MOONCAKE_P2P_OK);
    CHECK_EQ(mooncake_p2p_unregister(a, "ckpt/c"), MOONCAKE_P2P_NOT_HELD);
    CHECK_EQ(mooncake_p2p_size(a, "ckpt/c"), MOONCAKE_P2P_NOT_FOUND);
    free(src);
    free(dst);
}

/* Bytes through memory the nodes keep; an agent fetching on request. */
static void test_bytes_and_agent(mooncake_p2p_t a, const char *name_a, mooncake_p2p_t b,
                                 const char *name_b) {
    enum { N = 100000 };
    unsigned char *data = malloc(N), *out = malloc(N);
    REQUIRE(data != NULL && out != NULL);
    fill_pattern(data, N, 9);
    CHECK_EQ(mooncake_p2p_put(a, "blob", data, N), MOONCAKE_P2P_OK);
    CHECK_EQ(mooncake_p2p_put(a, "blob", data, N), MOONCAKE_P2P_ALREADY_HELD);
    memset(out, 0x5a, N);
    CHECK_EQ(mooncake_p2p_get(b, "blob", out, N - 1), -1);
    CHECK(last_error_is("mooncake_p2p_get", "100000 bytes"));
    CHECK_EQ(mooncake_last_error_errno(), ERANGE);
    CHECK_EQ(out[0], 0x5a);
    CHECK_EQ(mooncake_p2p_get(b, "blob", out, N), N);
    CHECK(memcmp(out, data, N) == 0);
    memset(out, 0, N);
    CHECK_EQ(mooncake_p2p_get(b, "blob", out, N), N); /* from B's own copy */
    CHECK(memcmp(out, data, N) == 0);
    CHECK_EQ(mooncake_p2p_get(a, "blob", out, N), N);
    CHECK_EQ(mooncake_p2p_put(b, "blob", data, N), MOONCAKE_P2P_ALREADY_HELD);
    CHECK_EQ(mooncake_p2p_get(b, "none", out, N), MOONCAKE_P2P_NOT_FOUND);
    CHECK_EQ(mooncake_p2p_delete_replica(b, "blob"), MOONCAKE_P2P_OK);
    CHECK_EQ(mooncake_p2p_unregister(a, "blob"), MOONCAKE_P2P_OK);

    /* A runs an agent; B pushes a copy of its object to A. */
    char address[64] = "";
    CHECK_EQ(mooncake_p2p_start_agent(a, NULL, address, sizeof address), 0);
    CHECK(strncmp(address, "127.0.0.1:", 10) == 0);
    CHECK_EQ(mooncake_p2p_start_agent(a, "127.0.0.1:0", NULL, 0), -1);
    CHECK(last_error_is("mooncake_p2p_start_agent", "already runs"));
    /* Too small for the address: the agent is stopped again. */
    char small[4] = "abc";
    CHECK_EQ(mooncake_p2p_start_agent(b, "127.0.0.1:0", small, sizeof small), -1);
    CHECK(last_error_is("mooncake_p2p_start_agent", "needs"));
    CHECK(strcmp(small, "abc") == 0);
    CHECK_EQ(mooncake_p2p_start_agent(b, "127.0.0.1:0", NULL, 0), 0);

    fill_pattern(data, N, 11);
    CHECK_EQ(mooncake_p2p_put(b, "pushed", data, N), MOONCAKE_P2P_OK);
    CHECK_EQ(mooncake_p2p_replicate_to(b, "pushed", name_a), MOONCAKE_P2P_OK);
    CHECK_EQ(mooncake_p2p_replicate_to(b, "pushed", name_a), MOONCAKE_P2P_OK); /* held */
    CHECK_EQ(mooncake_p2p_replicate_to(b, "missing", name_a), MOONCAKE_P2P_NOT_FOUND);
    CHECK(last_error_is("mooncake_p2p_replicate_to", "missing"));
    /* B withdraws its copy: A's replica is all that is left, and A reads it. */
    CHECK_EQ(mooncake_p2p_unregister(b, "pushed"), MOONCAKE_P2P_OK);
    char *peers = json_of(mooncake_p2p_discover_peers, b, "pushed");
    char expected[128];
    snprintf(expected, sizeof expected, "[\"%s\"]", name_a);
    CHECK(strcmp(peers, expected) == 0);
    free(peers);
    memset(out, 0, N);
    CHECK_EQ(mooncake_p2p_get(a, "pushed", out, N), N);
    CHECK(memcmp(out, data, N) == 0);
    (void)name_b;
    free(data);
    free(out);
}

static void test_two_nodes(const char *url) {
    const char *name_a = "127.0.0.1:17901", *name_b = "127.0.0.1:17902";
    mooncake_p2p_t a = mooncake_p2p_create(url, name_a, NULL);
    REQUIRE(a != NULL);
    /* B shares an engine this program made (no transport yet: TCP is installed), whose
     * handle is destroyed at once: the node keeps the engine. */
    transfer_engine_t engine = createTransferEngine(url, name_b, "127.0.0.1", 0, 0);
    REQUIRE(engine != NULL);
    mooncake_p2p_t b = mooncake_p2p_create_on_engine(engine, url);
    REQUIRE(b != NULL);
    destroyTransferEngine(engine);
    CHECK(a != b);
    char name[64];
    CHECK_EQ(mooncake_p2p_local_server_name(a, name, sizeof name), 0);
    CHECK(strcmp(name, name_a) == 0);
    CHECK_EQ(mooncake_p2p_local_server_name(b, name, strlen(name_b) + 1), 0);
    CHECK(strcmp(name, name_b) == 0);
    CHECK(strcmp(mooncake_last_error_message(), "") == 0);
    test_arguments(a);
    test_objects(a, name_a, b, name_b);
    test_bytes_and_agent(a, name_a, b, name_b);
    /* A still holds a replica of "pushed" and runs an agent; destroying withdraws. */
    mooncake_p2p_destroy(a);
    CHECK(strcmp(mooncake_last_error_message(), "") == 0);
    CHECK_EQ(mooncake_p2p_size(b, "pushed"), MOONCAKE_P2P_NOT_FOUND);
    CHECK_EQ(mooncake_p2p_size(a, "pushed"), -1);
    mooncake_p2p_destroy(b);
    mooncake_p2p_destroy(b);
    CHECK(last_error_is("mooncake_p2p_destroy", "is not a live P2P store"));
}

int main(void) {
    test_create_and_handles();
    const char *url = getenv("MOONCAKE_TEST_METADATA_URL");
    if (url != NULL && *url != '\0') {
        test_two_nodes(url);
    } else {
        printf("p2p_api: skipping the two-node checks (MOONCAKE_TEST_METADATA_URL unset)\n");
    }
    return test_summary("p2p_api");
}
