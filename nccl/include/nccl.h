/* nccl.h: the NCCL C API (2.22 level) as Plugboard's libplugboard-nccl.so
 * provides it. Written for Plugboard from NCCL's public documentation: the
 * types, values and signatures match NCCL's, so a program built against
 * NCCL's own header runs on this library unchanged (LD_LIBRARY_PATH or
 * LD_PRELOAD; the library's SONAME is libnccl.so.2). What it does not serve
 * returns ncclInvalidUsage and ncclGetLastError() says what. See
 * nccl/README.md. */
#ifndef PLUGBOARD_NCCL_H_
#define PLUGBOARD_NCCL_H_

#include <cuda_runtime.h>
#include <limits.h>
#include <stddef.h>

#define NCCL_MAJOR 2
#define NCCL_MINOR 22
#define NCCL_PATCH 0
#define NCCL_SUFFIX "plugboard"
/** NCCL's version code: 10000 * major + 100 * minor + patch (since 2.9). */
#define NCCL_VERSION(X, Y, Z) (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))
#define NCCL_VERSION_CODE NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/** A communicator (opaque). */
typedef struct ncclComm* ncclComm_t;
/** The null communicator. */
#define NCCL_COMM_NULL NULL

/** Bytes of a unique id. */
#define NCCL_UNIQUE_ID_BYTES 128
/** Made by ncclGetUniqueId on one rank, handed to every rank out of band. */
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/** Result codes (values as NCCL's). */
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

/** Config fields left unset take the library's defaults. */
#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
/** ncclCommSplit color of a rank that joins no new communicator. */
#define NCCL_SPLIT_NOCOLOR -1

/** Communicator options (ncclCommInitRankConfig, ncclCommSplit). Plugboard
 * reads blocking (0: ncclCommInitRankConfig and ncclCommInitRankScalable
 * outside a group return ncclInProgress and set up in the background;
 * splits, shrinks, group inits and calls still complete before returning)
 * and accepts the others; fields past `size` are never read, so older and
 * newer layouts both work. */
typedef struct ncclConfig_v21700 {
  size_t size;          /**< sizeof(ncclConfig_t) of the caller's header. */
  unsigned int magic;   /**< 0xcafebeef. */
  unsigned int version; /**< NCCL_VERSION_CODE of the caller's header. */
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
} ncclConfig_t;

/** Initializer of an ncclConfig_t with every option unset. */
#define NCCL_CONFIG_INITIALIZER                                                                   \
  {                                                                                               \
    sizeof(ncclConfig_t), 0xcafebeef, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH),           \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, \
        NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT                                              \
  }

/** Element types (values as NCCL's). */
typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/** Reductions (values as NCCL's). ncclAvg since NCCL 2.10. */
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff
} ncclRedOp_t;

/** Where ncclRedOpCreatePreMulSum's scalar lives. */
typedef enum { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 } ncclScalarResidence_t;

/** *version = NCCL_VERSION_CODE of this library. */
ncclResult_t ncclGetVersion(int* version);
/** A new unique id; this process becomes the rendezvous root (keep it running). */
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
/** Joins rank `rank` of `nranks` on the current CUDA device (collective, blocking). */
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
/** ncclCommInitRank with options (see ncclConfig_t). With blocking = 0:
 * ncclInProgress at once; poll ncclCommGetAsyncError until ncclSuccess
 * before any other call on *comm (earlier ones are ncclInvalidArgument). */
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config);
/** One process, ndev ranks: comm[i] on devlist[i] (or device i when devlist is NULL). */
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
/** Collective over comm: ranks of one color form *newcomm, ordered by key then rank
 * (NCCL_SPLIT_NOCOLOR: *newcomm = NULL). */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);

/** ncclCommShrink: leave the parent's ongoing operations alone. */
#define NCCL_SHRINK_DEFAULT 0x00
/** ncclCommShrink: first end the parent's ongoing operations (recovery
 * from a failed or hung rank); the parent is still to be destroyed. */
#define NCCL_SHRINK_ABORT 0x01
/** A new communicator of the parent's ranks minus excludeRanksList (NCCL
 * 2.27), ranks renumbered in order. Only the ranks that stay call it; the
 * excluded ones (failed or leaving) take no part. */
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                            ncclConfig_t* config, int shrinkFlags);
/** Finishes the communicator's outstanding work (before ncclCommDestroy). */
ncclResult_t ncclCommFinalize(ncclComm_t comm);
/** Frees the communicator (every rank destroys its own). */
ncclResult_t ncclCommDestroy(ncclComm_t comm);
/** Ends every wait of the communicator's work, then frees it (a
 * non-blocking init still running finishes, bounded by the timeout
 * setting, and frees it in the background). */
ncclResult_t ncclCommAbort(ncclComm_t comm);
/** *asyncError = ncclInProgress while a non-blocking init runs, else the
 * first error the communicator's set-up or background work met (ncclSuccess if none). */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
/** Ranks of the communicator. */
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
/** CUDA device the communicator was created on. */
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
/** This rank in the communicator. */
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
/** A short text for a result code. */
const char* ncclGetErrorString(ncclResult_t result);
/** The text of this thread's last error (comm may be NULL). */
const char* ncclGetLastError(ncclComm_t comm);

/** recvbuff[i] = op over ranks of sendbuff[i]. */
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
/** recvbuff on every rank = sendbuff of root. */
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream);
/** In-place broadcast (legacy). */
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream);
/** recvbuff on root = op over ranks of sendbuff. */
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream);
/** recvbuff = each rank's sendbuff (sendcount elements) by rank. */
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);
/** recvbuff = block `rank` (recvcount elements) of op over ranks of sendbuff. */
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
/** Sends count elements to peer (pairs with its ncclRecv). */
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
/** Receives count elements from peer (pairs with its ncclSend). */
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);

/** Starts a group: calls until ncclGroupEnd are issued together. Groups nest. */
ncclResult_t ncclGroupStart(void);
/** Ends a group; the outermost issues its calls (inits in parallel, then each
 * communicator's collectives in call order, then its sends and receives). */
ncclResult_t ncclGroupEnd(void);

/** Device memory for communication buffers (cudaMalloc here). */
ncclResult_t ncclMemAlloc(void** ptr, size_t size);
/** Frees ncclMemAlloc memory. */
ncclResult_t ncclMemFree(void* ptr);
/** Accepted for compatibility: Plugboard's collectives need no buffer registration. */
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
/** Releases an ncclCommRegister handle. */
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle);
/** Makes op = "multiply each input by *scalar, then sum" for calls of this
 * datatype on comm (not float8). ncclScalarHostImmediate copies the scalar
 * now; ncclScalarDevice reads the device pointer when each call runs, so it
 * must stay valid until ncclRedOpDestroy. */
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
/** Destroys an op made by ncclRedOpCreatePreMulSum on comm (anything else: ncclInvalidArgument). */
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/** Block j of sendbuff (count elements) goes to rank j; block i of recvbuff comes from rank i (NCCL 2.28). */
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                          cudaStream_t stream);
/** ncclCommInitRank from several ids (NCCL 2.23); Plugboard's rendezvous needs one: commIds[0]. */
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                      ncclConfig_t* config);

/** A registered window (NCCL 2.27). */
typedef struct ncclWindow_vidmem* ncclWindow_t;
/** winFlags: a plain window. */
#define NCCL_WIN_DEFAULT 0x00
/** winFlags: every rank registers a buffer of the same size (NCCL's symmetric kernels). */
#define NCCL_WIN_COLL_SYMMETRIC 0x01
/** Registers buff..buff+size as a window of comm. Accepted and kept so the
 * program runs unchanged; Plugboard's collectives copy through their own
 * scratch and need no registration, so a window changes nothing (logged
 * once per communicator). Unknown winFlags bits: ncclInvalidArgument. */
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags);
/** Ends a window of comm; one that comm does not hold: ncclInvalidArgument. */
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);

/* Calls of newer NCCL releases that Plugboard does not serve: present so
 * programs built against those releases load, each returning
 * ncclInvalidUsage with ncclGetLastError saying so. Their NCCL-specific
 * types are opaque here. */
/** Not served: NCCL's device API (2.28); reqs and devComm are NCCL's own types. */
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const void* reqs, void* devComm);
/** Not served: NCCL's device API (2.28). */
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const void* devComm);
/** Not served: NCCL's group-time estimate (2.22); simInfo is NCCL's ncclSimInfo_t. */
ncclResult_t ncclGroupSimulateEnd(void* simInfo);

#ifdef __cplusplus
}
#endif

#endif /* PLUGBOARD_NCCL_H_ */
