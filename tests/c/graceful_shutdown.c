/* enableGracefulShutdown: SIGTERM makes the library destroy every live engine (their
 * metadata keys are deleted) and exit with status 128 + SIGTERM = 143. The Rust driver
 * runs this against an HTTP metadata server (MOONCAKE_TEST_METADATA_URL), checks the
 * exit status, and checks that no key is left on the server. */
#include "test_common.h"

#include <signal.h>
#include <unistd.h>

int main(void) {
    const char *url = getenv("MOONCAKE_TEST_METADATA_URL");
    REQUIRE(url != NULL);
    transfer_engine_t a = createTransferEngine(url, "graceful-a", "127.0.0.1", 0, 1);
    transfer_engine_t b = createTransferEngine(url, "graceful-b", "127.0.0.1", 0, 1);
    REQUIRE(a != NULL && b != NULL);
    static unsigned char region[65536];
    CHECK_EQ(registerLocalMemory(a, region, sizeof region, "cpu:0", 1), 0);
    /* a's descriptor is on the server: b can open it. */
    CHECK_EQ(openSegment(b, "graceful-a"), 1);
    enableGracefulShutdown(a);
    CHECK_EQ(strlen(mooncake_last_error_message()), 0);
    enableGracefulShutdown(b); /* once per process: the second call changes nothing */
    if (g_failed != 0) return test_summary("graceful_shutdown");
    printf("graceful_shutdown: %d passed, 0 failed before the signal\n", g_passed);
    fflush(stdout);
    fflush(stderr);
    kill(getpid(), SIGTERM);
    /* The watcher thread exits the process; never reached unless it is broken. */
    double deadline = now_seconds() + TEST_DEADLINE_SECONDS;
    while (now_seconds() < deadline) {
        struct timespec pause = {0, 10000000};
        nanosleep(&pause, NULL);
    }
    fprintf(stderr, "still alive %.0f s after SIGTERM\n", TEST_DEADLINE_SECONDS);
    return 2;
}
