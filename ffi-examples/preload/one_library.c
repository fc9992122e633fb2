/* Built against upstream's two library names (NEEDED libtransfer_engine.so and
 * libmooncake_store.so), run with both names resolving to libmooncake: the loader maps
 * the one file once, so the Transfer Engine and the Store share one library (one
 * engine, one set of globals). Lists the mapped engine libraries from /proc/self/maps
 * (shared objects whose file name names mooncake or transfer_engine) and exits 0 when
 * there is exactly one. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <store_c.h>
#include <transfer_engine_c.h>

int main(void) {
    transfer_engine_t engine = createTransferEngine("P2PHANDSHAKE", "127.0.0.1", "127.0.0.1", 0, 0);
    mooncake_store_t store = mooncake_store_create();
    if (!engine || !store) {
        fprintf(stderr, "one_library: createTransferEngine or mooncake_store_create failed\n");
        return 1;
    }
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps) return 1;
    char line[4096], seen[16][1024];
    int n = 0;
    while (fgets(line, sizeof line, maps)) {
        char *path = strchr(line, '/');
        if (!path) continue;
        path[strcspn(path, "\n")] = '\0';
        /* Shared objects named for the engine, by file name: the directories on the
         * way (a checkout called mooncake-rs, say) say nothing. */
        const char *base = strrchr(path, '/') + 1;
        if (!strstr(base, ".so")) continue;
        if (!strstr(base, "mooncake") && !strstr(base, "transfer_engine")) continue;
        int dup = 0;
        for (int i = 0; i < n; i++) dup |= strcmp(seen[i], path) == 0;
        if (!dup && n < 16) snprintf(seen[n++], sizeof seen[0], "%s", path);
    }
    fclose(maps);
    for (int i = 0; i < n; i++) printf("mapped: %s\n", seen[i]);
    mooncake_store_destroy(store);
    destroyTransferEngine(engine);
    if (n != 1) {
        fprintf(stderr, "one_library: %d engine libraries mapped, expected 1\n", n);
        return 1;
    }
    printf("one_library: OK\n");
    return 0;
}
