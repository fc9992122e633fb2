/* Every function of the TENT C API (tent/transfer_engine.h), with the bytes verified:
 * configuration, two TENT engines and a classic one on loopback (P2PHANDSHAKE),
 * memory allocation and every registration form, segments and their info, batches
 * with task, list and overall status, notifications with a batch and by handle,
 * cancellation, transfers between a TENT engine and a classic engine both ways (and
 * a TENT handle driven through the classic API), NIC load, and bad input: NULL
 * pointers, unknown batches, tasks and segments, zeroed requests. Run with and
 * without MC_DISABLE_SAME_HOST=1 (a shared-memory transport hint is refused then). */
#include "test_common.h"

#include <unistd.h>

#include "mooncake/tent/transfer_engine.h"

#define LEN (1u << 20)

static tent_engine_t tent_engine(void) {
    tent_set_config("metadata_type", "p2p");
    tent_set_config("rpc_server_hostname", "127.0.0.1");
    return tent_create_engine();
}

static tent_request_t tent_req(int opcode, void *source, tent_segment_id_t target,
                               uint64_t offset, uint64_t length) {
    tent_request_t r;
    memset(&r, 0, sizeof r);
    r.opcode = opcode;
    r.source = source;
    r.target_id = target;
    r.target_offset = offset;
    r.length = length;
    r.priority = 1;
    r.transport_hint = TRANSPORT_UNSPEC;
    return r;
}

/* Polls the batch until it is terminal; returns its overall status. */
static int wait_overall(tent_engine_t e, tent_batch_id_t batch, tent_status_t *out) {
    double deadline = now_seconds() + TEST_DEADLINE_SECONDS;
    tent_status_t st;
    memset(&st, 0, sizeof st);
    while (now_seconds() < deadline) {
        if (tent_overall_status(e, batch, &st) != 0) return -1;
        if (st.status == STATUS_COMPLETED || st.status == STATUS_FAILED ||
            st.status == STATUS_CANCELED)
            break;
        struct timespec pause = {0, 200000};
        nanosleep(&pause, NULL);
    }
    if (out) *out = st;
    return st.status;
}

/* Polls until a notification named `name` with `msg` arrived at `e`. */
static int wait_notif(tent_engine_t e, const char *name, const char *msg) {
    double deadline = now_seconds() + TEST_DEADLINE_SECONDS;
    while (now_seconds() < deadline) {
        tent_notifi_info info;
        memset(&info, 0xAB, sizeof info);
        if (tent_recv_notifs(e, &info) != 0) return 0;
        int found = 0;
        if (info.num_records == 0 && info.records != NULL) return 0;
        for (int i = 0; i < info.num_records; i++)
            if (strcmp(info.records[i].name, name) == 0 && strcmp(info.records[i].msg, msg) == 0)
                found = 1;
        tent_free_notifs(&info);
        if (info.records != NULL || info.num_records != 0) return 0;
        if (found) return 1;
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    return 0;
}

int main(void) {
    /* Configuration: a file first, then keys over it. */
    char path[] = "/tmp/tent_api_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    const char *json = "{\"metadata_type\": \"p2p\", \"rpc_server_port\": 0, \"log_level\": \"info\"}";
    REQUIRE(write(fd, json, strlen(json)) == (ssize_t)strlen(json));
    close(fd);
    tent_load_config_from_file(path);
    tent_engine_t target = tent_engine();
    tent_engine_t initiator = tent_engine();
    unlink(path);
    transfer_engine_t classic = p2p_engine(1);
    REQUIRE(target != NULL && initiator != NULL && classic != NULL);
    CHECK_EQ(tent_available(target), 1);
    CHECK_EQ(tent_available(NULL), 0);
    tent_set_config("metadata_type", "zookeeper");
    CHECK(tent_create_engine() == NULL);
    tent_set_config("metadata_type", "p2p");

    char tname[128], iname[128], addr[64];
    uint16_t port = 0;
    CHECK_EQ(tent_segment_name(target, tname, sizeof tname), 0);
    CHECK_EQ(tent_segment_name(initiator, iname, sizeof iname), 0);
    CHECK(strcmp(tname, iname) != 0);
    CHECK_EQ(tent_rpc_server_addr_port(target, addr, sizeof addr, &port), 0);
    char joined[160];
    snprintf(joined, sizeof joined, "%s:%u", addr, (unsigned)port);
    CHECK(strcmp(joined, tname) == 0);
    /* A TENT engine is an engine of the classic API too. */
    char via_classic[128];
    CHECK_EQ(getLocalIpAndPort(target, via_classic, sizeof via_classic), 0);
    CHECK(strcmp(via_classic, tname) == 0);
    printf("target %s, initiator %s\n", tname, iname);

    /* Memory: allocation (plain and _ex) and every registration form. */
    void *remote = NULL, *local = NULL, *back = NULL, *spare = NULL;
    CHECK_EQ(tent_allocate_memory(target, &remote, LEN, "cpu"), 0);
    CHECK_EQ(tent_allocate_memory(initiator, &local, LEN, "*"), 0);
    tent_memory_options_t opts;
    memset(&opts, 0, sizeof opts);
    strcpy(opts.location, "cpu:0");
    opts.permission = PERM_GLOBAL_READ_WRITE;
    opts.transport_type = TRANSPORT_TCP;
    CHECK_EQ(tent_allocate_memory_ex(initiator, &back, LEN, &opts), 0);
    CHECK_EQ(tent_allocate_memory(initiator, &spare, 8192, ""), 0);
    REQUIRE(remote && local && back && spare);
    CHECK_EQ(tent_allocate_memory(initiator, &spare, 4096, "cuda:0"), -1);
    CHECK_EQ(tent_allocate_memory(initiator, &spare, 0, "cpu"), -1);
    fill_pattern(local, LEN, 9);
    CHECK_EQ(tent_register_memory(target, remote, LEN), 0);
    CHECK_EQ(tent_register_memory_with_perm(initiator, local, LEN, PERM_GLOBAL_READ_ONLY), 0);
    CHECK_EQ(tent_register_memory_ex(initiator, back, LEN, &opts), 0);
    CHECK_EQ(tent_register_memory(initiator, local, 64), -1); /* overlap */
    void *halves[2] = {spare, (char *)spare + 4096};
    size_t sizes[2] = {4096, 4096};
    CHECK_EQ(tent_register_memory_batch(initiator, halves, sizes, 2, PERM_LOCAL_READ_WRITE), 0);
    CHECK_EQ(tent_unregister_memory_batch(initiator, halves, NULL, 2), 0);
    CHECK_EQ(tent_register_memory_batch_ex(initiator, halves, sizes, 2, &opts), 0);
    CHECK_EQ(tent_unregister_memory_batch(initiator, halves, sizes, 2), 0);
    CHECK_EQ(tent_register_memory_batch(initiator, halves, sizes, 0, 0), 0);

    /* Segments: open (by name, own name, ""), info, close. */
    tent_segment_id_t seg = 99, self = 99;
    CHECK_EQ(tent_open_segment(initiator, &seg, tname), 0);
    CHECK(seg != LOCAL_SEGMENT_ID);
    CHECK_EQ(tent_open_segment(initiator, &self, iname), 0);
    CHECK_EQ(self, LOCAL_SEGMENT_ID);
    CHECK_EQ(tent_open_segment(initiator, &self, ""), 0);
    CHECK_EQ(self, LOCAL_SEGMENT_ID);
    tent_segment_info_t info;
    CHECK_EQ(tent_get_segment_info(initiator, seg, &info), 0);
    CHECK_EQ(info.type, TYPE_MEMORY);
    uint64_t raddr = 0;
    for (int i = 0; i < info.num_buffers; i++)
        if (info.buffers[i].base == (uint64_t)(uintptr_t)remote && info.buffers[i].length == LEN)
            raddr = info.buffers[i].base;
    CHECK(raddr != 0);
    tent_free_segment_info(&info);
    CHECK(info.buffers == NULL && info.num_buffers == 0);
    tent_free_segment_info(&info);
    CHECK_EQ(tent_get_segment_info(initiator, LOCAL_SEGMENT_ID, &info), 0);
    CHECK(info.num_buffers >= 2);
    tent_free_segment_info(&info);
    REQUIRE(raddr != 0);

    /* WRITE, then READ back in two halves: task, list and overall status. */
    tent_batch_id_t batch = tent_allocate_batch(initiator, 4);
    CHECK(batch != UINT64_MAX);
    tent_request_t w = tent_req(OPCODE_WRITE, local, seg, raddr, LEN);
    CHECK_EQ(tent_submit(initiator, batch, &w, 1), 0);
    tent_status_t st;
    CHECK_EQ(wait_overall(initiator, batch, &st), STATUS_COMPLETED);
    CHECK_EQ(st.transferred_bytes, LEN);
    CHECK_EQ(tent_task_status(initiator, batch, 0, &st), 0);
    CHECK_EQ(st.status, STATUS_COMPLETED);
    CHECK(memcmp(remote, local, LEN) == 0);
    tent_request_t r[2] = {tent_req(OPCODE_READ, back, seg, raddr, LEN / 2),
                           tent_req(OPCODE_READ, (char *)back + LEN / 2, seg, raddr + LEN / 2,
                                    LEN / 2)};
    CHECK_EQ(tent_submit(initiator, batch, r, 2), 0);
    CHECK_EQ(wait_overall(initiator, batch, &st), STATUS_COMPLETED);
    CHECK_EQ(st.transferred_bytes, 2ull * LEN);
    CHECK(memcmp(back, local, LEN) == 0);
    tent_status_t list[2];
    size_t count = 2;
    CHECK_EQ(tent_task_status_list(initiator, batch, list, &count), 0);
    CHECK_EQ(count, 3);
    CHECK(list[0].status == STATUS_COMPLETED && list[1].status == STATUS_COMPLETED);
    /* Transport hints pin a transport: TCP and shared memory reach the peer; RDMA is
     * not installed and NVLink does not exist here, so those requests are refused. */
    memset(remote, 0, LEN);
    tent_request_t pinned = tent_req(OPCODE_WRITE, local, seg, raddr, LEN);
    tent_batch_id_t pb = tent_allocate_batch(initiator, 4);
    pinned.transport_hint = TRANSPORT_TCP;
    CHECK_EQ(tent_submit(initiator, pb, &pinned, 1), 0);
    CHECK_EQ(wait_overall(initiator, pb, NULL), STATUS_COMPLETED);
    CHECK(memcmp(remote, local, LEN) == 0);
    memset(remote, 0, LEN);
    pinned.transport_hint = TRANSPORT_SHM;
    if (getenv("MC_DISABLE_SAME_HOST") != NULL) {
        CHECK_EQ(tent_submit(initiator, pb, &pinned, 1), -1); /* not installed */
    } else {
        CHECK_EQ(tent_submit(initiator, pb, &pinned, 1), 0);
        CHECK_EQ(wait_overall(initiator, pb, NULL), STATUS_COMPLETED);
        CHECK(memcmp(remote, local, LEN) == 0);
    }
    pinned.transport_hint = TRANSPORT_RDMA;
    CHECK_EQ(tent_submit(initiator, pb, &pinned, 1), -1);
    pinned.transport_hint = TRANSPORT_NVLINK;
    CHECK_EQ(tent_submit(initiator, pb, &pinned, 1), -1);
    CHECK_EQ(tent_free_batch(initiator, pb), 0);

    /* Cancelling a task that already moved changes nothing. */
    CHECK_EQ(tent_cancel_task(initiator, batch, 2), 0);
    CHECK_EQ(tent_task_status(initiator, batch, 2, &st), 0);
    CHECK_EQ(st.status, STATUS_COMPLETED);
    CHECK_EQ(tent_cancel_task(initiator, batch, 3), -1);
    CHECK_EQ(tent_free_batch(initiator, batch), 0);
    CHECK_EQ(tent_free_batch(initiator, batch), -1);

    /* Notifications: after a batch, and by handle. */
    memset(remote, 0, LEN);
    batch = tent_allocate_batch(initiator, 1);
    CHECK_EQ(tent_submit_notif(initiator, batch, &w, 1, "tent", "batch done"), 0);
    CHECK_EQ(wait_overall(initiator, batch, NULL), STATUS_COMPLETED);
    CHECK(wait_notif(target, "tent", "batch done"));
    CHECK(memcmp(remote, local, LEN) == 0);
    CHECK_EQ(tent_free_batch(initiator, batch), 0);
    CHECK_EQ(tent_send_notifs(initiator, seg, "direct", "hello"), 0);
    CHECK(wait_notif(target, "direct", "hello"));
    CHECK_EQ(tent_send_notifs(initiator, seg, NULL, "nameless"), 0);
    CHECK(wait_notif(target, "", "nameless"));

    /* TENT and classic engines move bytes between each other, both ways. */
    unsigned char *cbuf = calloc(1, LEN);
    REQUIRE(cbuf != NULL);
    CHECK_EQ(registerLocalMemory(classic, cbuf, LEN, "cpu:0", 1), 0);
    char cname[128];
    segment_name(classic, cname, sizeof cname);
    tent_segment_id_t cseg = 0;
    CHECK_EQ(tent_open_segment(initiator, &cseg, cname), 0);
    batch = tent_allocate_batch(initiator, 1);
    w = tent_req(OPCODE_WRITE, local, cseg, (uint64_t)(uintptr_t)cbuf, LEN);
    CHECK_EQ(tent_submit(initiator, batch, &w, 1), 0);
    CHECK_EQ(wait_overall(initiator, batch, NULL), STATUS_COMPLETED);
    CHECK(memcmp(cbuf, local, LEN) == 0);
    CHECK_EQ(tent_free_batch(initiator, batch), 0);
    segment_id_t tseg = openSegment(classic, tname);
    CHECK(tseg > 0);
    fill_pattern(cbuf, LEN, 4);
    batch_id_t cb = allocateBatchID(classic, 1);
    transfer_request_t cr = request(OPCODE_WRITE, cbuf, tseg, raddr, LEN);
    CHECK_EQ(submitTransfer(classic, cb, &cr, 1), 0);
    CHECK_EQ(wait_task(classic, cb, 0, NULL), STATUS_COMPLETED);
    CHECK(memcmp(remote, cbuf, LEN) == 0);
    CHECK_EQ(freeBatchID(classic, cb), 0);

    /* NIC load: no RDMA here, so no NICs. */
    tent_nic_load_stat_t nics[4];
    count = 4;
    CHECK_EQ(tent_get_nic_load_stats(initiator, nics, &count), 0);
    CHECK_EQ(count, 0);

    /* Bad input: -1 (or NULL / UINT64_MAX / 0), never a crash. */
    tent_request_t zero;
    memset(&zero, 0, sizeof zero);
    batch = tent_allocate_batch(initiator, 1);
    CHECK_EQ(tent_submit(initiator, batch, NULL, 1), -1);
    CHECK_EQ(tent_submit(initiator, 0x5eed, &w, 1), -1);
    zero.opcode = 7;
    CHECK_EQ(tent_submit(initiator, batch, &zero, 1), -1);
    zero = tent_req(OPCODE_WRITE, local, (tent_segment_id_t)1 << 40, raddr, 64);
    CHECK_EQ(tent_submit(initiator, batch, &zero, 1), -1);
    tent_request_t two[2] = {tent_req(OPCODE_WRITE, local, seg, raddr, 64),
                             tent_req(OPCODE_WRITE, local, seg, raddr, 64)};
    CHECK_EQ(tent_submit(initiator, batch, two, 2), -1); /* more than the batch holds */
    CHECK_EQ(tent_submit_notif(initiator, batch, two, 1, NULL, "x"), -1);
    CHECK_EQ(tent_task_status(initiator, batch, 0, &st), -1);
    CHECK_EQ(tent_task_status(initiator, 0, 0, &st), -1);
    CHECK_EQ(tent_task_status(initiator, batch, 0, NULL), -1);
    CHECK_EQ(tent_overall_status(initiator, 0x5eed, &st), -1);
    CHECK_EQ(tent_overall_status(initiator, batch, &st), 0);
    CHECK_EQ(st.status, STATUS_COMPLETED); /* an empty batch */
    count = 1;
    CHECK_EQ(tent_task_status_list(initiator, batch, NULL, &count), -1);
    CHECK_EQ(tent_cancel_task(initiator, 0x5eed, 0), -1);
    CHECK_EQ(tent_free_batch(initiator, batch), 0);
    CHECK_EQ(tent_open_segment(initiator, NULL, tname), -1);
    CHECK_EQ(tent_open_segment(initiator, &seg, NULL), -1);
    CHECK_EQ(tent_open_segment(initiator, &seg, "127.0.0.1:1"), -1);
    CHECK_EQ(tent_close_segment(initiator, 12345), -1);
    CHECK_EQ(tent_get_segment_info(initiator, 12345, &info), -1);
    CHECK_EQ(tent_get_segment_info(initiator, seg, NULL), -1);
    CHECK_EQ(tent_send_notifs(initiator, 12345, "a", "b"), -1);
    CHECK_EQ(tent_recv_notifs(initiator, NULL), -1);
    CHECK_EQ(tent_segment_name(initiator, NULL, 8), -1);
    CHECK_EQ(tent_rpc_server_addr_port(initiator, addr, sizeof addr, NULL), -1);
    CHECK_EQ(tent_register_memory(initiator, NULL, 64), -1);
    CHECK_EQ(tent_register_memory_ex(initiator, spare, 64, NULL), -1);
    CHECK_EQ(tent_register_memory_batch(initiator, NULL, sizes, 2, 0), -1);
    CHECK_EQ(tent_unregister_memory(initiator, spare, 0), -1); /* not registered */
    CHECK_EQ(tent_free_memory(initiator, cbuf), -1);           /* not ours to free */
    CHECK_EQ(tent_get_nic_load_stats(initiator, NULL, &count), -1);
    CHECK(tent_allocate_batch(NULL, 1) == UINT64_MAX);
    CHECK_EQ(tent_free_batch(NULL, 1), -1);
    tent_free_notifs(NULL);
    tent_free_segment_info(NULL);
    tent_set_config(NULL, "x");
    tent_load_config_from_file(NULL);

    /* Teardown: unregister, free, destroy (twice is harmless). */
    CHECK_EQ(tent_unregister_memory(initiator, local, LEN), 0);
    CHECK_EQ(tent_free_memory(initiator, local), 0);
    CHECK_EQ(tent_free_memory(initiator, back), 0); /* still registered: unregistered first */
    CHECK_EQ(tent_free_memory(initiator, spare), 0);
    CHECK_EQ(tent_free_memory(initiator, spare), -1);
    CHECK_EQ(unregisterLocalMemory(classic, cbuf), 0);
    destroyTransferEngine(classic);
    free(cbuf);
    tent_destroy_engine(initiator);
    CHECK_EQ(tent_available(initiator), 0);
    tent_destroy_engine(initiator);
    tent_destroy_engine(NULL);
    CHECK_EQ(tent_unregister_memory(target, remote, 0), 0);
    CHECK_EQ(tent_free_memory(target, remote), 0);
    tent_destroy_engine(target);
    return test_summary("tent_api");
}
