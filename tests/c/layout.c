/* Layout and signature conformance with upstream's transfer_engine_c.h on LP64
 * (x86-64 / aarch64): every struct's size and field offsets, the macros' values and
 * types, and every function's exact type (a mismatch is a compile error under
 * -Werror, since assigning to a differently typed function pointer warns). */
#include "test_common.h"

#include <stddef.h>

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(transfer_request_t) == 40, "sizeof transfer_request_t");
_Static_assert(_Alignof(transfer_request_t) == 8, "alignof transfer_request_t");
_Static_assert(offsetof(struct transfer_request, opcode) == 0, "opcode");
_Static_assert(offsetof(struct transfer_request, source) == 8, "source");
_Static_assert(offsetof(struct transfer_request, target_id) == 16, "target_id");
_Static_assert(offsetof(struct transfer_request, target_offset) == 24, "target_offset");
_Static_assert(offsetof(struct transfer_request, length) == 32, "length");

_Static_assert(sizeof(transfer_status_t) == 16, "sizeof transfer_status_t");
_Static_assert(offsetof(struct transfer_status, status) == 0, "status");
_Static_assert(offsetof(struct transfer_status, transferred_bytes) == 8, "transferred_bytes");

_Static_assert(sizeof(buffer_entry_t) == 16, "sizeof buffer_entry_t");
_Static_assert(offsetof(struct buffer_entry, addr) == 0, "addr");
_Static_assert(offsetof(struct buffer_entry, length) == 8, "length");

_Static_assert(sizeof(notify_msg_t) == 16, "sizeof notify_msg_t");
_Static_assert(offsetof(struct notify_msg, name) == 0, "name");
_Static_assert(offsetof(struct notify_msg, msg) == 8, "msg");

_Static_assert(sizeof(nic_load_stat_t) == 80, "sizeof nic_load_stat_t");
_Static_assert(offsetof(struct nic_load_stat, device_name) == 0, "device_name");
_Static_assert(sizeof(((nic_load_stat_t *)0)->device_name) == 64, "device_name[64]");
_Static_assert(offsetof(struct nic_load_stat, inflight_bytes) == 64, "inflight_bytes");
_Static_assert(offsetof(struct nic_load_stat, ewma_bandwidth_bps) == 72, "ewma");

_Static_assert(sizeof(segment_desc_t) == 48, "sizeof segment_desc_t");
_Static_assert(offsetof(struct segment_desc, type) == 0, "type");
_Static_assert(offsetof(struct segment_desc, desc_) == 8, "desc_");
_Static_assert(offsetof(struct segment_desc, desc_.rdma.addr) == 8, "rdma.addr");
_Static_assert(offsetof(struct segment_desc, desc_.rdma.size) == 16, "rdma.size");
_Static_assert(offsetof(struct segment_desc, desc_.rdma.location) == 24, "rdma.location");
_Static_assert(offsetof(struct segment_desc, desc_.nvmeof.file_path) == 8, "file_path");
_Static_assert(offsetof(struct segment_desc, desc_.nvmeof.port) == 40, "nvmeof.port");
#else
#error "layout expectations are written for LP64 x86-64 / aarch64"
#endif

/* Macros, their values and their types. */
_Static_assert(_Generic((segment_id_t)0, int32_t: 1, default: 0), "segment_id_t is int32_t");
_Static_assert(_Generic((segment_handle_t)0, int32_t: 1, default: 0), "segment_handle_t");
_Static_assert(_Generic((batch_id_t)0, uint64_t: 1, default: 0), "batch_id_t is uint64_t");
_Static_assert(_Generic(((transfer_request_t *)0)->target_id, int32_t: 1, default: 0),
               "target_id is segment_id_t");
_Static_assert(_Generic((transfer_engine_t)0, void *: 1, default: 0), "transfer_engine_t");
_Static_assert(_Generic((transport_t)0, void *: 1, default: 0), "transport_t");
_Static_assert(LOCAL_SEGMENT == 0, "LOCAL_SEGMENT");
_Static_assert(INVALID_BATCH == UINT64_MAX, "INVALID_BATCH");
_Static_assert(OPCODE_READ == 0 && OPCODE_WRITE == 1, "OPCODE_*");
_Static_assert(STATUS_WAITING == 0 && STATUS_PENDING == 1 && STATUS_INVALID == 2 &&
                   STATUS_CANCELED == 3 && STATUS_COMPLETED == 4 && STATUS_TIMEOUT == 5 &&
                   STATUS_FAILED == 6,
               "STATUS_*");
#ifndef TRANSFER_ENGINE_C
#error "include guard TRANSFER_ENGINE_C"
#endif
#ifndef segment_id_t
#error "segment_id_t must be a macro, as upstream's"
#endif
#ifndef batch_id_t
#error "batch_id_t must be a macro, as upstream's"
#endif

/* Every function, typed as upstream declares it. */
static transfer_engine_t (*const f_create)(const char *, const char *, const char *, uint64_t,
                                           int) = createTransferEngine;
static int (*const f_discover)(transfer_engine_t) = discoverTopology;
static int (*const f_local_ip)(transfer_engine_t, char *, size_t) = getLocalIpAndPort;
static transport_t (*const f_install)(transfer_engine_t, const char *, void **) = installTransport;
static int (*const f_uninstall)(transfer_engine_t, const char *) = uninstallTransport;
static int32_t (*const f_open)(transfer_engine_t, const char *) = openSegment;
static int32_t (*const f_open_nc)(transfer_engine_t, const char *) = openSegmentNoCache;
static int (*const f_close)(transfer_engine_t, int32_t) = closeSegment;
static int (*const f_warmup)(transfer_engine_t, const char *) = warmupEfaSegment;
static int (*const f_remove)(transfer_engine_t, const char *) = removeLocalSegment;
static void (*const f_destroy)(transfer_engine_t) = destroyTransferEngine;
static int (*const f_reg)(transfer_engine_t, void *, size_t, const char *, int) =
    registerLocalMemory;
static int (*const f_unreg)(transfer_engine_t, void *) = unregisterLocalMemory;
static int (*const f_reg_batch)(transfer_engine_t, buffer_entry_t *, size_t, const char *) =
    registerLocalMemoryBatch;
static int (*const f_unreg_batch)(transfer_engine_t, void **, size_t) =
    unregisterLocalMemoryBatch;
static uint64_t (*const f_alloc)(transfer_engine_t, size_t) = allocateBatchID;
static int (*const f_submit)(transfer_engine_t, uint64_t, struct transfer_request *, size_t) =
    submitTransfer;
static int (*const f_submit_n)(transfer_engine_t, uint64_t, struct transfer_request *, size_t,
                               notify_msg_t) = submitTransferWithNotify;
static notify_msg_t *(*const f_notifs)(transfer_engine_t, int *) = getNotifsFromEngine;
static int (*const f_free_notifs)(notify_msg_t *, int) = freeNotifsMsgBuf;
static int (*const f_gen_notify)(transfer_engine_t, uint64_t, notify_msg_t) = genNotifyInEngine;
static int (*const f_status)(transfer_engine_t, uint64_t, size_t, struct transfer_status *) =
    getTransferStatus;
static int (*const f_free_batch)(transfer_engine_t, uint64_t) = freeBatchID;
static int (*const f_sync)(transfer_engine_t) = syncSegmentCache;
static int (*const f_nic)(transfer_engine_t, nic_load_stat_t *, size_t *) = getNicLoadStats;
static void (*const f_graceful)(transfer_engine_t) = enableGracefulShutdown;
static int (*const f_links)(transfer_engine_t, char *, size_t, int) = showLinks;

/* The extensions. */
static const char *(*const x_msg)(void) = mooncake_last_error_message;
static int (*const x_errno)(void) = mooncake_last_error_errno;
static const char *(*const x_fn)(void) = mooncake_last_error_function;
static void (*const x_clear)(void) = mooncake_clear_last_error;
static const char *(*const x_version)(void) = mooncake_version;

int main(void) {
    const void *all[] = {
        (const void *)&f_create,    (const void *)&f_discover,   (const void *)&f_local_ip,
        (const void *)&f_install,   (const void *)&f_uninstall,  (const void *)&f_open,
        (const void *)&f_open_nc,   (const void *)&f_close,      (const void *)&f_warmup,
        (const void *)&f_remove,    (const void *)&f_destroy,    (const void *)&f_reg,
        (const void *)&f_unreg,     (const void *)&f_reg_batch,  (const void *)&f_unreg_batch,
        (const void *)&f_alloc,     (const void *)&f_submit,     (const void *)&f_submit_n,
        (const void *)&f_notifs,    (const void *)&f_free_notifs, (const void *)&f_gen_notify,
        (const void *)&f_status,    (const void *)&f_free_batch, (const void *)&f_sync,
        (const void *)&f_nic,       (const void *)&f_graceful,   (const void *)&f_links,
        (const void *)&x_msg,       (const void *)&x_errno,      (const void *)&x_fn,
        (const void *)&x_clear,     (const void *)&x_version,
    };
    CHECK_EQ(sizeof all / sizeof all[0], 27 + 5);
    CHECK(f_create != NULL && f_links != NULL && f_graceful != NULL && x_version != NULL);

    /* Runtime layout, as the library sees it: the status fields it writes. */
    transfer_status_t st;
    memset(&st, 0xAB, sizeof st);
    CHECK_EQ(getTransferStatus(NULL, 0, 0, &st), 1);
    CHECK_EQ(st.status, (int)0xABABABAB); /* untouched on failure */

    const char *v = x_version();
    CHECK(v != NULL && strchr(v, '.') != NULL);
    printf("mooncake_version() = %s\n", v);
    return test_summary("layout");
}
