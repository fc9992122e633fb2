/* Mooncake Store from C: two store clients in one process put and get objects
 * through a master, with the data verified.
 *
 * The master: $MOONCAKE_MASTER ("host:port") when set; otherwise the program starts
 * the mooncake_master given as argv[1] (default: "mooncake_master" from PATH) on a free
 * 127.0.0.1 port and stops it at the end.
 *
 *   cc store_roundtrip.c $(pkg-config --cflags --libs mooncake) -o store_roundtrip
 *   ./store_roundtrip /opt/mooncake/bin/mooncake_master
 *
 * Exit status 0 on success, 1 on any failure (with the reason on stderr). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <mooncake/mooncake_ext.h> /* mooncake_last_error_message */
#include <mooncake/store_c.h>

static pid_t g_master = -1;

static void stop_master(void) {
    if (g_master > 0) {
        kill(g_master, SIGTERM);
        waitpid(g_master, NULL, 0);
        g_master = -1;
    }
}

static int fail(const char *what, long long code) {
    fprintf(stderr, "store_roundtrip: %s failed (%lld): %s\n", what, code,
            mooncake_last_error_message());
    stop_master();
    return 1;
}

/* A port nobody listens on right now (the kernel's pick for an ephemeral bind). */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

static int accepts(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0) close(fd);
    return ok;
}

/* Starts the master on 127.0.0.1 and waits (up to 20 s) until its RPC port accepts. */
static int start_master(const char *binary, char *addr, size_t addr_len) {
    int port = free_port(), metrics = free_port();
    if (port < 0 || metrics < 0) return -1;
    char port_flag[32], metrics_flag[32];
    snprintf(port_flag, sizeof port_flag, "--port=%d", port);
    snprintf(metrics_flag, sizeof metrics_flag, "--metrics_port=%d", metrics);
    g_master = fork();
    if (g_master < 0) return -1;
    if (g_master == 0) {
        execlp(binary, binary, "--rpc_address=127.0.0.1", port_flag,
               "--metrics_host=127.0.0.1", metrics_flag, (char *)NULL);
        fprintf(stderr, "store_roundtrip: cannot run %s\n", binary);
        _exit(127);
    }
    for (int i = 0; i < 400; i++) {
        if (accepts(port)) {
            snprintf(addr, addr_len, "127.0.0.1:%d", port);
            return 0;
        }
        if (waitpid(g_master, NULL, WNOHANG) == g_master) {
            g_master = -1;
            return -1;
        }
        struct timespec pause = {0, 50000000};
        nanosleep(&pause, NULL);
    }
    return -1;
}

static mooncake_store_t new_store(const char *master) {
    mooncake_store_t s = mooncake_store_create();
    if (!s) return NULL;
    /* 64 MiB contributed to the cluster, a 16 MiB local staging buffer, TCP, peers
     * found by handshake (no metadata server). The port is picked automatically. */
    int rc = mooncake_store_setup(s, "127.0.0.1", "P2PHANDSHAKE", 64u << 20, 16u << 20, "tcp",
                                  "", master);
    if (rc != 0) {
        fprintf(stderr, "store_roundtrip: mooncake_store_setup: %d (%s)\n", rc,
                mooncake_last_error_message());
        mooncake_store_destroy(s);
        return NULL;
    }
    return s;
}

int main(int argc, char **argv) {
    char master[128];
    const char *env = getenv("MOONCAKE_MASTER");
    if (env && *env) {
        snprintf(master, sizeof master, "%s", env);
    } else {
        const char *binary = argc > 1 ? argv[1] : "mooncake_master";
        if (start_master(binary, master, sizeof master) != 0) return fail("starting the master", -1);
        printf("started %s on %s\n", binary, master);
    }

    mooncake_store_t a = new_store(master), b = new_store(master);
    if (!a || !b) return fail("mooncake_store_setup", -1);
    char host_a[128], host_b[128];
    mooncake_store_get_hostname(a, host_a, sizeof host_a);
    mooncake_store_get_hostname(b, host_b, sizeof host_b);
    printf("stores %s and %s set up against %s\n", host_a, host_b, master);

    /* put (copied through the local buffer) on A, read on B. */
    const char *greeting = "hello from mooncake_store_put";
    mooncake_replicate_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.replica_num = 1;
    int rc = mooncake_store_put(a, "example/greeting", greeting, strlen(greeting) + 1, &cfg);
    if (rc != 0) return fail("mooncake_store_put", rc);
    char small[64] = {0};
    int64_t n = mooncake_store_get_into(b, "example/greeting", small, sizeof small);
    if (n != (int64_t)strlen(greeting) + 1 || strcmp(small, greeting) != 0)
        return fail("mooncake_store_get_into (greeting)", n);

    /* Zero-copy: 1 MiB from a registered buffer on B, read into a registered buffer on A. */
    size_t len = 1u << 20;
    unsigned char *src = malloc(len), *dst = calloc(1, len);
    if (!src || !dst) return fail("malloc", -1);
    for (size_t i = 0; i < len; i++) src[i] = (unsigned char)(i * 7u + (i >> 10));
    if ((rc = mooncake_store_register_buffer(b, src, len)) != 0)
        return fail("mooncake_store_register_buffer", rc);
    if ((rc = mooncake_store_register_buffer(a, dst, len)) != 0)
        return fail("mooncake_store_register_buffer", rc);
    if ((rc = mooncake_store_put_from(b, "example/blob", src, len, NULL)) != 0)
        return fail("mooncake_store_put_from", rc);
    if (mooncake_store_is_exist(a, "example/blob") != 1) return fail("mooncake_store_is_exist", 0);
    if (mooncake_store_get_size(a, "example/blob") != (int64_t)len)
        return fail("mooncake_store_get_size", mooncake_store_get_size(a, "example/blob"));
    n = mooncake_store_get_into(a, "example/blob", dst, len);
    if (n != (int64_t)len || memcmp(src, dst, len) != 0) return fail("mooncake_store_get_into (blob)", n);
    printf("put and got back %zu bytes: verified\n", len);

    if ((rc = mooncake_store_remove(a, "example/blob", 1)) != 0) return fail("mooncake_store_remove", rc);
    if (mooncake_store_is_exist(b, "example/blob") != 0) return fail("is_exist after remove", -1);
    mooncake_store_remove(a, "example/greeting", 1);

    mooncake_store_unregister_buffer(b, src);
    mooncake_store_unregister_buffer(a, dst);
    mooncake_store_destroy(a);
    mooncake_store_destroy(b);
    free(src);
    free(dst);
    stop_master();
    printf("store_roundtrip: OK\n");
    return 0;
}
