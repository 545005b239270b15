/* A stand-in libnccl for plugboard-perf's loader tests: every function the
 * tool resolves, each returning success (0) and doing nothing.
 * ncclGetVersion reports 2.21.5. Built with FAKE_NCCL_ONLY_VERSION, it
 * exports ncclGetVersion alone (a library that is not NCCL 2.x); with
 * FAKE_NCCL_WINDOWS it reports 2.28.3 and adds the symmetric-memory calls. */
#include <stddef.h>

#define EXPORT __attribute__((visibility("default")))

#ifdef FAKE_NCCL_WINDOWS
EXPORT int ncclGetVersion(int* v) { *v = 22803; return 0; }
EXPORT int ncclMemAlloc(void** p, size_t n) { (void)p; (void)n; return 0; }
EXPORT int ncclMemFree(void* p) { (void)p; return 0; }
EXPORT int ncclCommWindowRegister(void* c, void* b, size_t n, void** w, int f) { (void)c; (void)b; (void)n; (void)w; (void)f; return 0; }
EXPORT int ncclCommWindowDeregister(void* c, void* w) { (void)c; (void)w; return 0; }
#else
EXPORT int ncclGetVersion(int* v) { *v = 22105; return 0; }
#endif

#ifndef FAKE_NCCL_ONLY_VERSION
EXPORT const char* ncclGetErrorString(int r) { return r ? "fake error" : "no error"; }
EXPORT int ncclGetUniqueId(void* id) { (void)id; return 0; }
typedef struct { char internal[128]; } Id;
EXPORT int ncclCommInitRank(void** comm, int n, Id id, int rank) { (void)comm; (void)n; (void)id; (void)rank; return 0; }
EXPORT int ncclCommDestroy(void* comm) { (void)comm; return 0; }
EXPORT int ncclAllReduce(void) { return 0; }
EXPORT int ncclAllGather(void) { return 0; }
EXPORT int ncclReduceScatter(void) { return 0; }
EXPORT int ncclBroadcast(void) { return 0; }
EXPORT int ncclReduce(void) { return 0; }
EXPORT int ncclSend(void) { return 0; }
EXPORT int ncclRecv(void) { return 0; }
EXPORT int ncclGroupStart(void) { return 0; }
EXPORT int ncclGroupEnd(void) { return 0; }
#endif
