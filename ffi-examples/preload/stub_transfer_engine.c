/* A stand-in for upstream's libtransfer_engine.so: the same file name, SONAME and the
 * 27 functions of transfer_engine_c.h, every one of which fails (and says so on
 * stderr). A program linked against it cannot work -- until libmooncake is preloaded
 * or swapped in under this name (see run.sh).
 *
 *   cc -shared -fPIC -Wl,-soname,libtransfer_engine.so stub_transfer_engine.c \
 *      -I<prefix>/include -o libtransfer_engine.so */
#include <stdio.h>

#include <transfer_engine_c.h>

#define STUB(name) fprintf(stderr, "stub libtransfer_engine: %s called\n", name)

transfer_engine_t createTransferEngine(const char *m, const char *n, const char *h, uint64_t p, int a) {
    (void)m, (void)n, (void)h, (void)p, (void)a;
    STUB("createTransferEngine");
    return NULL;
}
int discoverTopology(transfer_engine_t e) { (void)e; STUB("discoverTopology"); return -1; }
int getLocalIpAndPort(transfer_engine_t e, char *b, size_t l) {
    (void)e, (void)b, (void)l;
    STUB("getLocalIpAndPort");
    return -1;
}
transport_t installTransport(transfer_engine_t e, const char *p, void **a) {
    (void)e, (void)p, (void)a;
    STUB("installTransport");
    return NULL;
}
int uninstallTransport(transfer_engine_t e, const char *p) { (void)e, (void)p; STUB("uninstallTransport"); return -1; }
segment_id_t openSegment(transfer_engine_t e, const char *n) { (void)e, (void)n; STUB("openSegment"); return -1; }
segment_id_t openSegmentNoCache(transfer_engine_t e, const char *n) {
    (void)e, (void)n;
    STUB("openSegmentNoCache");
    return -1;
}
int closeSegment(transfer_engine_t e, segment_id_t s) { (void)e, (void)s; STUB("closeSegment"); return -1; }
int warmupEfaSegment(transfer_engine_t e, const char *n) { (void)e, (void)n; STUB("warmupEfaSegment"); return -1; }
int removeLocalSegment(transfer_engine_t e, const char *n) { (void)e, (void)n; STUB("removeLocalSegment"); return -1; }
void destroyTransferEngine(transfer_engine_t e) { (void)e; STUB("destroyTransferEngine"); }
int registerLocalMemory(transfer_engine_t e, void *a, size_t l, const char *loc, int r) {
    (void)e, (void)a, (void)l, (void)loc, (void)r;
    STUB("registerLocalMemory");
    return -1;
}
int unregisterLocalMemory(transfer_engine_t e, void *a) { (void)e, (void)a; STUB("unregisterLocalMemory"); return -1; }
int registerLocalMemoryBatch(transfer_engine_t e, buffer_entry_t *b, size_t n, const char *loc) {
    (void)e, (void)b, (void)n, (void)loc;
    STUB("registerLocalMemoryBatch");
    return -1;
}
int unregisterLocalMemoryBatch(transfer_engine_t e, void **a, size_t n) {
    (void)e, (void)a, (void)n;
    STUB("unregisterLocalMemoryBatch");
    return -1;
}
batch_id_t allocateBatchID(transfer_engine_t e, size_t n) { (void)e, (void)n; STUB("allocateBatchID"); return INVALID_BATCH; }
int submitTransfer(transfer_engine_t e, batch_id_t b, struct transfer_request *r, size_t n) {
    (void)e, (void)b, (void)r, (void)n;
    STUB("submitTransfer");
    return -1;
}
int submitTransferWithNotify(transfer_engine_t e, batch_id_t b, struct transfer_request *r, size_t n,
                             notify_msg_t m) {
    (void)e, (void)b, (void)r, (void)n, (void)m;
    STUB("submitTransferWithNotify");
    return -1;
}
notify_msg_t *getNotifsFromEngine(transfer_engine_t e, int *s) { (void)e, (void)s; STUB("getNotifsFromEngine"); return NULL; }
int freeNotifsMsgBuf(notify_msg_t *m, int s) { (void)m, (void)s; STUB("freeNotifsMsgBuf"); return -1; }
int genNotifyInEngine(transfer_engine_t e, uint64_t t, notify_msg_t m) {
    (void)e, (void)t, (void)m;
    STUB("genNotifyInEngine");
    return -1;
}
int getTransferStatus(transfer_engine_t e, batch_id_t b, size_t t, transfer_status_t *s) {
    (void)e, (void)b, (void)t, (void)s;
    STUB("getTransferStatus");
    return -1;
}
int freeBatchID(transfer_engine_t e, batch_id_t b) { (void)e, (void)b; STUB("freeBatchID"); return -1; }
int syncSegmentCache(transfer_engine_t e) { (void)e; STUB("syncSegmentCache"); return -1; }
int getNicLoadStats(transfer_engine_t e, nic_load_stat_t *s, size_t *c) {
    (void)e, (void)s, (void)c;
    STUB("getNicLoadStats");
    return -1;
}
void enableGracefulShutdown(transfer_engine_t e) { (void)e; STUB("enableGracefulShutdown"); }
int showLinks(transfer_engine_t e, char *b, size_t l, int j) { (void)e, (void)b, (void)l, (void)j; STUB("showLinks"); return -1; }
