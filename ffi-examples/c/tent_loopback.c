/* Upstream's TENT C API (tent/transfer_engine.h) against libmooncake: two engines on
 * loopback (P2PHANDSHAKE), memory allocated and registered through TENT, one WRITE and
 * one READ of 1 MiB with the bytes verified, and a notification.
 *
 *   cc -std=c11 tent_loopback.c $(pkg-config --cflags --libs mooncake) -o tent_loopback
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tent/transfer_engine.h"

#define LEN (1u << 20)

static int wait_batch(tent_engine_t e, tent_batch_id_t batch) {
    struct timespec pause = {0, 1000000};
    for (int i = 0; i < 60000; i++) {
        tent_status_t st;
        if (tent_overall_status(e, batch, &st) != 0) return -1;
        if (st.status == STATUS_COMPLETED || st.status == STATUS_FAILED) return st.status;
        nanosleep(&pause, NULL);
    }
    return -1;
}

static int fail(const char *what) {
    fprintf(stderr, "tent_loopback: %s failed\n", what);
    return 1;
}

int main(void) {
    tent_set_config("metadata_type", "p2p");
    tent_set_config("rpc_server_hostname", "127.0.0.1");
    tent_engine_t target = tent_create_engine(), initiator = tent_create_engine();
    if (!tent_available(target) || !tent_available(initiator)) return fail("tent_create_engine");

    void *remote = NULL, *local = NULL, *back = NULL;
    if (tent_allocate_memory(target, &remote, LEN, "cpu") != 0 ||
        tent_allocate_memory(initiator, &local, LEN, "cpu") != 0 ||
        tent_allocate_memory(initiator, &back, LEN, "cpu") != 0)
        return fail("tent_allocate_memory");
    for (size_t i = 0; i < LEN; i++) ((unsigned char *)local)[i] = (unsigned char)(i * 13 + 5);
    if (tent_register_memory(target, remote, LEN) != 0 ||
        tent_register_memory(initiator, local, LEN) != 0 ||
        tent_register_memory(initiator, back, LEN) != 0)
        return fail("tent_register_memory");

    char name[128];
    tent_segment_id_t seg;
    if (tent_segment_name(target, name, sizeof name) != 0 ||
        tent_open_segment(initiator, &seg, name) != 0)
        return fail("tent_open_segment");
    tent_request_t req = {OPCODE_WRITE, local, seg, (uint64_t)(uintptr_t)remote, LEN, 0,
                          TRANSPORT_UNSPEC};
    tent_batch_id_t batch = tent_allocate_batch(initiator, 2);
    if (tent_submit_notif(initiator, batch, &req, 1, "tent_loopback", "written") != 0 ||
        wait_batch(initiator, batch) != STATUS_COMPLETED)
        return fail("WRITE");
    req.opcode = OPCODE_READ;
    req.source = back;
    if (tent_submit(initiator, batch, &req, 1) != 0 ||
        wait_batch(initiator, batch) != STATUS_COMPLETED)
        return fail("READ");
    if (memcmp(remote, local, LEN) != 0 || memcmp(back, local, LEN) != 0)
        return fail("comparing the bytes");
    tent_free_batch(initiator, batch);

    int notified = 0;
    struct timespec pause = {0, 1000000};
    for (int i = 0; i < 60000 && !notified; i++) {
        tent_notifi_info info;
        if (tent_recv_notifs(target, &info) != 0) return fail("tent_recv_notifs");
        for (int r = 0; r < info.num_records; r++)
            notified |= strcmp(info.records[r].msg, "written") == 0;
        tent_free_notifs(&info);
        if (!notified) nanosleep(&pause, NULL);
    }
    if (!notified) return fail("the notification");

    tent_unregister_memory(initiator, local, LEN);
    tent_unregister_memory(initiator, back, LEN);
    tent_unregister_memory(target, remote, LEN);
    tent_free_memory(initiator, local);
    tent_free_memory(initiator, back);
    tent_free_memory(target, remote);
    tent_destroy_engine(initiator);
    tent_destroy_engine(target);
    printf("tent_loopback: wrote, read back and was notified of %u bytes: OK\n", LEN);
    return 0;
}
