// The NCCL API library on GPUs, used as an NCCL program uses NCCL: only
// nccl.h and the CUDA runtime. Forked ranks (one GPU each where there are
// enough, else sharing), an id from ncclGetUniqueId made before the fork.
// Every collective, grouped and lone send/recv (alltoall with a send to
// itself, mixed call orders), a group mixing a collective with p2p, calls
// on two streams, graph capture, argument errors, split, init of several
// devices from one process.
#include <gtest/gtest.h>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../unit/env_guard.hpp"
#include "gpu_test_util.hpp"
#include "multiproc.hpp"
#include "nccl.h"

using namespace plugboard::test;

namespace {

void ncclCheck(ncclResult_t r, const char* what) {
  if (r != ncclSuccess)
    throw std::runtime_error(std::string(what) + ": " + ncclGetErrorString(r) + ": " + ncclGetLastError(nullptr));
}
void cudaCheck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
#define NCCL_OK(call) ncclCheck((call), #call)
#define CUDA_OK(call) cudaCheck((call), #call)

using Body = std::function<void(ncclComm_t, int rank, int n, cudaStream_t)>;

/// n forked ranks, each with a communicator on GPU rank % devices and a
/// stream; every rank's result. bodyEndsComm: the body aborts or destroys
/// the communicator itself (no finalize and destroy after it).
std::vector<RankResult> runNcclRanksResults(int n, const Body& body, bool bodyEndsComm = false) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) throw std::runtime_error(std::string("ncclGetUniqueId: ") + ncclGetLastError(nullptr));
  return runRanks(n, std::chrono::seconds(100), [&](int rank, int nranks, const plugboard::UniqueId&) {
    int devices = 0;
    CUDA_OK(cudaGetDeviceCount(&devices));
    CUDA_OK(cudaSetDevice(rank % devices));
    ncclComm_t comm = nullptr;
    NCCL_OK(ncclCommInitRank(&comm, nranks, id, rank));
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    body(comm, rank, nranks, s);
    if (!bodyEndsComm) {
      NCCL_OK(ncclCommFinalize(comm));
      NCCL_OK(ncclCommDestroy(comm));
    }
    cudaStreamDestroy(s);
  });
}

/// runNcclRanksResults, every rank required to pass.
void runNcclRanks(int n, const Body& body) { expectAllPassed(runNcclRanksResults(n, body)); }

/// A device array of T with host upload / download.
template <typename T>
struct Dev {
  T* p = nullptr;
  size_t n;
  explicit Dev(size_t count) : n(count) { CUDA_OK(cudaMalloc(&p, (count ? count : 1) * sizeof(T))); }
  ~Dev() { cudaFree(p); }
  // A pageable cudaMemcpy may return before its copy is done, and the calls
  // run on non-blocking streams: wait for the device.
  void put(const std::vector<T>& h) {
    CUDA_OK(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    CUDA_OK(cudaDeviceSynchronize());
  }
  std::vector<T> get() const {
    std::vector<T> h(n);
    CUDA_OK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
};

/// Rank r's input element i: small integers, exact in float.
float in(int r, size_t i) { return static_cast<float>((r + 1) * 3 + static_cast<int>(i % 13)); }

void expectEq(const std::vector<float>& got, const std::function<float(size_t)>& want, const std::string& what) {
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want(i))
      throw std::runtime_error(what + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", want " +
                               std::to_string(want(i)));
}

/// Waits for the stream, then fails on any error the communicator recorded
/// (a device wait that gave up leaves stale data behind).
void sync(ncclComm_t comm, cudaStream_t s) {
  CUDA_OK(cudaStreamSynchronize(s));
  ncclResult_t async = ncclSuccess;
  NCCL_OK(ncclCommGetAsyncError(comm, &async));
  ncclCheck(async, "the communicator's asynchronous error");
}

void collectives(ncclComm_t comm, int rank, int n, cudaStream_t s, size_t count) {
  const std::string tag = "rank " + std::to_string(rank) + " count " + std::to_string(count) + ": ";
  std::vector<float> mine(count), all(n * count);  // this rank's inputs: one block, n blocks
  for (size_t i = 0; i < count; ++i) mine[i] = in(rank, i);
  for (size_t j = 0; j < n * count; ++j) all[j] = in(rank, j);
  Dev<float> a(count), b(count), big(n * count);
  a.put(mine);
  NCCL_OK(ncclAllReduce(a.p, b.p, count, ncclFloat, ncclSum, comm, s));
  sync(comm, s);
  expectEq(b.get(), [&](size_t i) { float t = 0; for (int r = 0; r < n; ++r) t += in(r, i); return t; }, tag + "allreduce sum");
  NCCL_OK(ncclAllReduce(a.p, a.p, count, ncclFloat, ncclMax, comm, s));  // in place
  sync(comm, s);
  expectEq(a.get(), [&](size_t i) { return in(n - 1, i); }, tag + "allreduce max in place");
  a.put(mine);
  NCCL_OK(ncclAllGather(a.p, big.p, count, ncclFloat, comm, s));
  sync(comm, s);
  expectEq(big.get(), [&](size_t i) { return in(static_cast<int>(i / count), i % count); }, tag + "allgather");
  big.put(all);
  NCCL_OK(ncclReduceScatter(big.p, b.p, count, ncclFloat, ncclSum, comm, s));
  sync(comm, s);
  expectEq(b.get(), [&](size_t i) { float t = 0; for (int r = 0; r < n; ++r) t += in(r, rank * count + i); return t; },
           tag + "reducescatter");
  NCCL_OK(ncclAlltoAll(big.p, big.p, count, ncclFloat, comm, s));  // in place; big holds `all`
  sync(comm, s);
  expectEq(big.get(), [&](size_t j) { return in(static_cast<int>(j / count), rank * count + j % count); },
           tag + "alltoall in place");
  NCCL_OK(ncclBroadcast(a.p, b.p, count, ncclFloat, n - 1, comm, s));
  sync(comm, s);
  expectEq(b.get(), [&](size_t i) { return in(n - 1, i); }, tag + "broadcast");
  NCCL_OK(ncclReduce(a.p, b.p, count, ncclFloat, ncclMin, 0, comm, s));
  sync(comm, s);
  if (rank == 0) expectEq(b.get(), [&](size_t i) { return in(0, i); }, tag + "reduce min");
}

/// Count rank `from` sends rank `to` in the alltoall tests (one pair above the LL threshold).
size_t pairCount(int from, int to) { return from == 0 && to == 1 ? 300001 : 100 * (from + 1) + 10 * to + 1; }

/// Alltoall as grouped send/recv, receives posted first in reverse order
/// on odd ranks (any order within a group must work), a send to itself too.
void groupedAlltoall(ncclComm_t comm, int rank, int n, cudaStream_t s) {
  std::vector<Dev<float>*> out, src;
  for (int p = 0; p < n; ++p) {
    src.push_back(new Dev<float>(pairCount(rank, p)));
    std::vector<float> h(pairCount(rank, p));
    for (size_t i = 0; i < h.size(); ++i) h[i] = in(rank, i + p);
    src.back()->put(h);
    out.push_back(new Dev<float>(pairCount(p, rank)));
  }
  NCCL_OK(ncclGroupStart());
  for (int k = 0; k < n; ++k) {
    const int p = rank % 2 ? n - 1 - k : k;
    NCCL_OK(ncclRecv(out[p]->p, pairCount(p, rank), ncclFloat, p, comm, s));
  }
  for (int p = 0; p < n; ++p) NCCL_OK(ncclSend(src[p]->p, pairCount(rank, p), ncclFloat, p, comm, s));
  NCCL_OK(ncclGroupEnd());
  sync(comm, s);
  for (int p = 0; p < n; ++p)
    expectEq(out[p]->get(), [&](size_t i) { return in(p, i + rank); },
             "rank " + std::to_string(rank) + ": grouped alltoall from " + std::to_string(p));
  for (int p = 0; p < n; ++p) delete out[p], delete src[p];
}

}  // namespace

TEST(NcclApiGpu, EveryCollectiveMatchesTwoAndThreeRanks) {
  PB_REQUIRE_GPU_NO_INIT();
  for (int n : {2, 3})
    runNcclRanks(n, [](ncclComm_t comm, int rank, int n, cudaStream_t s) {
      for (size_t count : {size_t(1), size_t(1000), size_t(300001)}) collectives(comm, rank, n, s, count);
    });
}

TEST(NcclApiGpu, GroupedAlltoallInAnyOrderWithASendToItself) {
  PB_REQUIRE_GPU_NO_INIT();
  for (int n : {2, 3}) runNcclRanks(n, groupedAlltoall);
}

// Rank 0 groups an allreduce before a send, rank 1 its receive before the
// allreduce; lone sends and receives; a call on a second stream.
TEST(NcclApiGpu, GroupsMixCollectivesWithP2PAndStreamsMayDiffer) {
  PB_REQUIRE_GPU_NO_INIT();
  runNcclRanks(2, [](ncclComm_t comm, int rank, int, cudaStream_t s) {
    const size_t count = 5000;
    std::vector<float> mine(count);
    for (size_t i = 0; i < count; ++i) mine[i] = in(rank, i);
    Dev<float> a(count), b(count), c(count);
    a.put(mine);
    NCCL_OK(ncclGroupStart());
    if (rank == 0) {
      NCCL_OK(ncclAllReduce(a.p, b.p, count, ncclFloat, ncclSum, comm, s));
      NCCL_OK(ncclSend(a.p, count, ncclFloat, 1, comm, s));
    } else {
      NCCL_OK(ncclRecv(c.p, count, ncclFloat, 0, comm, s));
      NCCL_OK(ncclAllReduce(a.p, b.p, count, ncclFloat, ncclSum, comm, s));
    }
    NCCL_OK(ncclGroupEnd());
    sync(comm, s);
    expectEq(b.get(), [](size_t i) { return in(0, i) + in(1, i); }, "grouped allreduce");
    if (rank == 1) expectEq(c.get(), [](size_t i) { return in(0, i); }, "grouped recv");
    cudaStream_t s2;
    CUDA_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    for (int round = 0; round < 3; ++round) {  // lone p2p on s, then an allreduce on s2
      if (rank == 0) NCCL_OK(ncclSend(a.p, count, ncclFloat, 1, comm, s));
      else NCCL_OK(ncclRecv(c.p, count, ncclFloat, 0, comm, s));
      NCCL_OK(ncclAllReduce(a.p, b.p, count, ncclFloat, ncclSum, comm, s2));
    }
    sync(comm, s2);
    sync(comm, s);
    expectEq(b.get(), [](size_t i) { return in(0, i) + in(1, i); }, "allreduce on a second stream");
    if (rank == 1) expectEq(c.get(), [](size_t i) { return in(0, i); }, "lone recv");
    cudaStreamDestroy(s2);
  });
}

TEST(NcclApiGpu, CapturedGraphReplaysAllreduceAndGroupedSendRecv) {
  PB_REQUIRE_GPU_NO_INIT();
  runNcclRanks(2, [](ncclComm_t comm, int rank, int, cudaStream_t s) {
    const size_t count = 2000;
    Dev<float> a(count), b(count), c(count);
    cudaGraph_t graph;
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    NCCL_OK(ncclAllReduce(a.p, b.p, count, ncclFloat, ncclSum, comm, s));
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclSend(a.p, count, ncclFloat, 1 - rank, comm, s));
    NCCL_OK(ncclRecv(c.p, count, ncclFloat, 1 - rank, comm, s));
    NCCL_OK(ncclGroupEnd());
    CUDA_OK(cudaStreamEndCapture(s, &graph));
    cudaGraphExec_t exec;
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < 4; ++replay) {
      std::vector<float> h(count);
      for (size_t i = 0; i < count; ++i) h[i] = in(rank, i + replay);
      a.put(h);
      CUDA_OK(cudaGraphLaunch(exec, s));
      sync(comm, s);
      expectEq(b.get(), [&](size_t i) { return in(0, i + replay) + in(1, i + replay); }, "replayed allreduce");
      expectEq(c.get(), [&](size_t i) { return in(1 - rank, i + replay); }, "replayed send/recv");
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  });
}

TEST(NcclApiGpu, ArgumentErrorsReturnNcclsCodesAndQueriesAnswer) {
  PB_REQUIRE_GPU_NO_INIT();
  runNcclRanks(2, [](ncclComm_t comm, int rank, int n, cudaStream_t s) {
    Dev<float> a(16);
    auto expectResult = [](ncclResult_t got, ncclResult_t want, const std::string& text) {
      if (got != want || std::string(ncclGetLastError(nullptr)).find(text) == std::string::npos)
        throw std::runtime_error("got " + std::to_string(got) + " \"" + ncclGetLastError(nullptr) + "\", want " +
                                 std::to_string(want) + " saying \"" + text + "\"");
    };
    expectResult(ncclAllReduce(a.p, a.p, 4, static_cast<ncclDataType_t>(99), ncclSum, comm, s), ncclInvalidArgument,
                 "datatype 99");
    expectResult(ncclAllReduce(a.p, a.p, 4, ncclFloat, static_cast<ncclRedOp_t>(5), comm, s), ncclInvalidArgument,
                 "reduction op 5");
    expectResult(ncclBroadcast(a.p, a.p, 4, ncclFloat, n, comm, s), ncclInvalidArgument, "root 2 is out of range");
    expectResult(ncclAllGather(nullptr, a.p, 4, ncclFloat, comm, s), ncclInvalidArgument, "sendbuff is NULL");
    expectResult(ncclSend(a.p, 4, ncclFloat, -1, comm, s), ncclInvalidArgument, "peer -1");
    expectResult(ncclAllReduce(a.p, a.p, SIZE_MAX / 2, ncclFloat, ncclSum, comm, s), ncclInvalidArgument, "overflows");
    ncclRedOp_t op;
    float scalar = 2;
    expectResult(ncclRedOpCreatePreMulSum(&op, nullptr, ncclFloat, ncclScalarHostImmediate, comm),
                 ncclInvalidArgument, "scalar is NULL");
    expectResult(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, static_cast<ncclScalarResidence_t>(7), comm),
                 ncclInvalidArgument, "residence 7");
    NCCL_OK(ncclRedOpCreatePreMulSum(&op, &scalar, ncclHalf, ncclScalarHostImmediate, comm));
    expectResult(ncclAllReduce(a.p, a.p, 4, ncclFloat, op, comm, s), ncclInvalidArgument,
                 "is a PreMulSum op made for half, and this call's datatype is float");
    NCCL_OK(ncclRedOpDestroy(op, comm));
    expectResult(ncclRedOpDestroy(op, comm), ncclInvalidArgument, "is not a PreMulSum op alive on this communicator");
    expectResult(ncclAllReduce(a.p, a.p, 4, ncclHalf, op, comm, s), ncclInvalidArgument,
                 "neither ncclSum/Prod/Max/Min/Avg nor a PreMulSum op");
    expectResult(ncclRedOpDestroy(ncclSum, comm), ncclInvalidArgument, "is a built-in op");
    int count = 0, me = -1, dev = -1, cur = -2;
    NCCL_OK(ncclCommCount(comm, &count));
    NCCL_OK(ncclCommUserRank(comm, &me));
    NCCL_OK(ncclCommCuDevice(comm, &dev));
    CUDA_OK(cudaGetDevice(&cur));
    if (count != n || me != rank || dev != cur) throw std::runtime_error("ncclCommCount/UserRank/CuDevice disagree");
    ncclResult_t async = ncclInternalError;
    NCCL_OK(ncclCommGetAsyncError(comm, &async));
    if (async != ncclSuccess) throw std::runtime_error("ncclCommGetAsyncError reports an error after bad arguments only");
    void* handle = nullptr;
    NCCL_OK(ncclCommRegister(comm, a.p, 64, &handle));
    NCCL_OK(ncclCommDeregister(comm, handle));
    // Windows: accepted (a collective on one works), checked, ended once.
    ncclWindow_t win = nullptr;
    expectResult(ncclCommWindowRegister(comm, a.p, 64, nullptr, NCCL_WIN_COLL_SYMMETRIC), ncclInvalidArgument,
                 "win is NULL");
    expectResult(ncclCommWindowRegister(comm, a.p, 64, &win, 6), ncclInvalidArgument, "winFlags 6");
    NCCL_OK(ncclCommWindowRegister(comm, a.p, 64, &win, NCCL_WIN_COLL_SYMMETRIC));
    NCCL_OK(ncclAllReduce(a.p, a.p, 16, ncclFloat, ncclSum, comm, s));
    CUDA_OK(cudaStreamSynchronize(s));
    NCCL_OK(ncclCommWindowDeregister(comm, win));
    expectResult(ncclCommWindowDeregister(comm, win), ncclInvalidArgument, "not a window registered on this communicator");
    // After the errors the communicator still works.
    collectives(comm, rank, n, s, 7);
  });
}

/// PreMulSum ops (host and device scalars; float, half, int32) in allreduce
/// (out of place and in place), reducescatter and reduce: each input times
/// the scalar, then summed. Inputs and scalars keep every value exact.
void preMulSums(ncclComm_t comm, int rank, int n, cudaStream_t s, size_t count) {
  const std::string tag = "rank " + std::to_string(rank) + " count " + std::to_string(count) + ": ";
  std::vector<float> mine(count), all(n * count);
  for (size_t i = 0; i < count; ++i) mine[i] = in(rank, i);
  for (size_t j = 0; j < n * count; ++j) all[j] = in(rank, j);
  Dev<float> a(count), b(count), big(n * count), scalarOnDevice(1);
  scalarOnDevice.put({0.25f});
  float half = 0.5f;
  ncclRedOp_t byHalf, byQuarter;
  NCCL_OK(ncclRedOpCreatePreMulSum(&byHalf, &half, ncclFloat, ncclScalarHostImmediate, comm));
  half = 99;  // copied at creation: later changes do not count
  NCCL_OK(ncclRedOpCreatePreMulSum(&byQuarter, scalarOnDevice.p, ncclFloat, ncclScalarDevice, comm));
  auto sumTimes = [&](float k, size_t at) { float t = 0; for (int r = 0; r < n; ++r) t += k * in(r, at); return t; };
  a.put(mine);
  NCCL_OK(ncclAllReduce(a.p, b.p, count, ncclFloat, byHalf, comm, s));
  sync(comm, s);
  expectEq(b.get(), [&](size_t i) { return sumTimes(0.5f, i); }, tag + "allreduce premulsum x0.5");
  expectEq(a.get(), [&](size_t i) { return mine[i]; }, tag + "allreduce premulsum left its input alone");
  NCCL_OK(ncclAllReduce(a.p, a.p, count, ncclFloat, byQuarter, comm, s));
  sync(comm, s);
  expectEq(a.get(), [&](size_t i) { return sumTimes(0.25f, i); }, tag + "allreduce premulsum x0.25 (device scalar) in place");
  scalarOnDevice.put({2.0f});  // a device scalar is read when the call runs
  big.put(all);
  NCCL_OK(ncclReduceScatter(big.p, b.p, count, ncclFloat, byQuarter, comm, s));
  sync(comm, s);
  expectEq(b.get(), [&](size_t i) { return sumTimes(2.0f, rank * count + i); }, tag + "reducescatter premulsum x2");
  a.put(mine);
  NCCL_OK(ncclReduce(a.p, b.p, count, ncclFloat, byHalf, n - 1, comm, s));
  sync(comm, s);
  if (rank == n - 1) expectEq(b.get(), [&](size_t i) { return sumTimes(0.5f, i); }, tag + "reduce premulsum x0.5");
  NCCL_OK(ncclRedOpDestroy(byHalf, comm));
  NCCL_OK(ncclRedOpDestroy(byQuarter, comm));
  // Integers multiply exactly (wrapping as unsigned).
  int32_t three = 3;
  ncclRedOp_t byThree;
  NCCL_OK(ncclRedOpCreatePreMulSum(&byThree, &three, ncclInt32, ncclScalarHostImmediate, comm));
  std::vector<int32_t> ints(count);
  for (size_t i = 0; i < count; ++i) ints[i] = static_cast<int32_t>(in(rank, i)) - 7;
  Dev<int32_t> ia(count);
  ia.put(ints);
  NCCL_OK(ncclAllReduce(ia.p, ia.p, count, ncclInt32, byThree, comm, s));
  sync(comm, s);
  const std::vector<int32_t> gotInts = ia.get();
  for (size_t i = 0; i < count; ++i) {
    int32_t want = 0;
    for (int r = 0; r < n; ++r) want += 3 * (static_cast<int32_t>(in(r, i)) - 7);
    if (gotInts[i] != want)
      throw std::runtime_error(tag + "int32 premulsum x3: element " + std::to_string(i) + " is " +
                               std::to_string(gotInts[i]) + ", want " + std::to_string(want));
  }
  NCCL_OK(ncclRedOpDestroy(byThree, comm));
}

TEST(NcclApiGpu, PreMulSumScalesEveryInputBeforeTheSum) {
  PB_REQUIRE_GPU_NO_INIT();
  for (int n : {2, 3})
    runNcclRanks(n, [](ncclComm_t comm, int rank, int nranks, cudaStream_t s) {
      for (size_t count : {size_t(1), size_t(1001), size_t(300001)}) preMulSums(comm, rank, nranks, s, count);
    });
}

/// PreMulSum where PyTorch uses it: half values (pre-divided gradients)
/// and inside a CUDA graph (captured once, replayed with the device scalar
/// changed between replays: each replay reads it when it runs).
void preMulSumHalfAndGraphs(ncclComm_t comm, int rank, int n, cudaStream_t s, size_t count) {
  const std::string tag = "rank " + std::to_string(rank) + " count " + std::to_string(count) + ": ";
  // Half: inputs and results small multiples of 0.25, exact in half.
  std::vector<__half> mine(count);
  for (size_t i = 0; i < count; ++i) mine[i] = __float2half(in(rank, i));
  Dev<__half> h(count), hout(count);
  h.put(mine);
  __half quarter = __float2half(0.25f);  // the scalar has the op's datatype
  ncclRedOp_t byQuarter;
  NCCL_OK(ncclRedOpCreatePreMulSum(&byQuarter, &quarter, ncclHalf, ncclScalarHostImmediate, comm));
  NCCL_OK(ncclAllReduce(h.p, hout.p, count, ncclHalf, byQuarter, comm, s));
  sync(comm, s);
  std::vector<float> got;
  for (__half v : hout.get()) got.push_back(__half2float(v));
  auto sumTimes = [&](float k, size_t at) { float t = 0; for (int r = 0; r < n; ++r) t += k * in(r, at); return t; };
  expectEq(got, [&](size_t i) { return sumTimes(0.25f, i); }, tag + "half allreduce premulsum x0.25");
  NCCL_OK(ncclRedOpDestroy(byQuarter, comm));

  // A graph of allreduce, reducescatter (its scratch is a stream-ordered
  // allocation inside the capture) and reduce, all with a device scalar.
  Dev<float> a(count), b(count), c(count), big(n * count), k(1);
  std::vector<float> all(n * count);
  for (size_t j = 0; j < n * count; ++j) all[j] = in(rank, j);
  std::vector<float> vmine(count);
  for (size_t i = 0; i < count; ++i) vmine[i] = in(rank, i);
  a.put(vmine);
  big.put(all);
  k.put({2.0f});
  ncclRedOp_t byK;
  NCCL_OK(ncclRedOpCreatePreMulSum(&byK, k.p, ncclFloat, ncclScalarDevice, comm));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  NCCL_OK(ncclAllReduce(a.p, b.p, count, ncclFloat, byK, comm, s));
  NCCL_OK(ncclReduceScatter(big.p, c.p, count, ncclFloat, byK, comm, s));
  NCCL_OK(ncclReduce(a.p, a.p, count, ncclFloat, byK, 0, comm, s));  // in place: root's input becomes the result
  CUDA_OK(cudaStreamEndCapture(s, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (float scalar : {2.0f, 4.0f}) {
    k.put({scalar});
    a.put(vmine);
    CUDA_OK(cudaGraphLaunch(exec, s));
    sync(comm, s);
    const std::string what = tag + "graph replay with scalar " + std::to_string(scalar) + ": ";
    expectEq(b.get(), [&](size_t i) { return sumTimes(scalar, i); }, what + "allreduce");
    expectEq(c.get(), [&](size_t i) { return sumTimes(scalar, rank * count + i); }, what + "reducescatter");
    if (rank == 0) expectEq(a.get(), [&](size_t i) { return sumTimes(scalar, i); }, what + "reduce in place");
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  NCCL_OK(ncclRedOpDestroy(byK, comm));
}

TEST(NcclApiGpu, PreMulSumInHalfAndUnderGraphCapture) {
  PB_REQUIRE_GPU_NO_INIT();
  for (int n : {2, 3})
    runNcclRanks(n, [](ncclComm_t comm, int rank, int nranks, cudaStream_t s) {
      for (size_t count : {size_t(7), size_t(100003)}) preMulSumHalfAndGraphs(comm, rank, nranks, s, count);
    });
}

/// Every line of the files in dir whose names start with prefix.
std::string readLogs(const std::string& dir, const std::string& prefix) {
  std::string all;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name).rfind(prefix, 0) == 0) {
        std::ifstream f(dir + "/" + e->d_name);
        std::stringstream text;
        text << f.rdbuf();
        all += text.str();
      }
    closedir(d);
  }
  return all;
}

/// Times the real NCCL logged an operation named op (NCCL_DEBUG_SUBSYS=COLL:
/// "... NCCL INFO <op>: opCount ...").
size_t realCalls(const std::string& logs, const std::string& op) {
  const std::string line = "INFO " + op + ": opCount";
  size_t n = 0;
  for (size_t at = logs.find(line); at != std::string::npos; at = logs.find(line, at + 1)) ++n;
  return n;
}

/// What the fallback test runs with calls = allgather, reducescatter, alltoall, sendrecv:
/// Plugboard's allreduce beside the real NCCL's calls, a PreMulSum
/// reducescatter (scaled by Plugboard, summed by NCCL), grouped p2p with a
/// send to itself, and a group mixing both libraries' calls.
void fallbackMixed(ncclComm_t comm, int rank, int n, cudaStream_t s) {
  const size_t count = 1001;
  const std::string tag = "rank " + std::to_string(rank) + ": ";
  std::vector<float> mine(count), all(n * count);
  for (size_t i = 0; i < count; ++i) mine[i] = in(rank, i);
  for (size_t j = 0; j < n * count; ++j) all[j] = in(rank, j);
  Dev<float> a(count), b(count), big(n * count), out(n * count);
  a.put(mine);
  big.put(all);
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclAllReduce(a.p, b.p, count, ncclFloat, ncclSum, comm, s));  // Plugboard's
  NCCL_OK(ncclAllGather(a.p, out.p, count, ncclFloat, comm, s));         // the real NCCL's
  NCCL_OK(ncclGroupEnd());
  sync(comm, s);
  expectEq(b.get(), [&](size_t i) { float t = 0; for (int r = 0; r < n; ++r) t += in(r, i); return t; }, tag + "allreduce");
  expectEq(out.get(), [&](size_t i) { return in(static_cast<int>(i / count), i % count); }, tag + "allgather");
  float half = 0.5f;
  ncclRedOp_t op;
  NCCL_OK(ncclRedOpCreatePreMulSum(&op, &half, ncclFloat, ncclScalarHostImmediate, comm));
  NCCL_OK(ncclReduceScatter(big.p, b.p, count, ncclFloat, op, comm, s));
  sync(comm, s);
  NCCL_OK(ncclRedOpDestroy(op, comm));
  expectEq(b.get(), [&](size_t i) { float t = 0; for (int r = 0; r < n; ++r) t += 0.5f * in(r, rank * count + i); return t; },
           tag + "PreMulSum reducescatter");
  NCCL_OK(ncclAlltoAll(big.p, out.p, count, ncclFloat, comm, s));
  sync(comm, s);
  expectEq(out.get(), [&](size_t j) { return in(static_cast<int>(j / count), rank * count + j % count); }, tag + "alltoall");
  groupedAlltoall(comm, rank, n, s);
}

// nccl_fallback_library: the calls nccl_fallback_calls names go to a real
// NCCL (its own COLL log shows them), the others stay Plugboard's, results
// right either way. A real NCCL refuses two ranks on one GPU: 2 GPUs needed.
TEST(NcclApiGpu, FallbackHandsTheNamedCallsToARealNccl) {
  const char* real = std::getenv("PB_TEST_REAL_NCCL");
  if (!real || !*real) GTEST_SKIP() << "PB_TEST_REAL_NCCL names no real libnccl.so.2 (a path, or auto)";
  if (gpuCountWithoutInit() < 2) GTEST_SKIP() << "a real NCCL refuses two ranks on one GPU: needs 2 GPUs";
  char dirTemplate[] = "/tmp/pb-nccl-fallback-XXXXXX";
  ASSERT_NE(mkdtemp(dirTemplate), nullptr);
  const std::string dir = dirTemplate;
  struct Case {
    const char* calls;
    void (*body)(ncclComm_t, int, int, cudaStream_t);
    std::vector<std::string> real, ours;
  };
  const Case cases[] = {
      {"allgather, reducescatter, alltoall, sendrecv", fallbackMixed, {"AllGather", "ReduceScatter", "Send", "Recv"},
       {"AllReduce"}},
      {"allreduce,broadcast,reduce",
       [](ncclComm_t comm, int rank, int n, cudaStream_t s) { collectives(comm, rank, n, s, 1001); },
       {"AllReduce", "Broadcast", "Reduce"}, {"AllGather", "ReduceScatter", "Send"}},
  };
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); ++c) {
    SCOPED_TRACE(cases[c].calls);
    const std::string prefix = "case" + std::to_string(c) + ".";
    {
      EnvGuard env;
      env.set("PLUGBOARD_NCCL_FALLBACK_LIBRARY", real);
      env.set("PLUGBOARD_NCCL_FALLBACK_CALLS", cases[c].calls);
      env.set("NCCL_DEBUG", "INFO");
      env.set("NCCL_DEBUG_SUBSYS", "COLL");
      env.set("NCCL_DEBUG_FILE", dir + "/" + prefix + "%p.log");
      const auto results = runNcclRanksResults(2, [&](ncclComm_t comm, int rank, int n, cudaStream_t s) {
        cases[c].body(comm, rank, n, s);
      });
      for (const auto& r : results)
        if (r.message.find("exports its own copy of the C++ runtime") != std::string::npos)
          GTEST_SKIP() << "this build cannot host a real NCCL: " << r.message;
      expectAllPassed(results);
    }
    const std::string logs = readLogs(dir, prefix);
    for (const auto& op : cases[c].real) EXPECT_GT(realCalls(logs, op), 0u) << op << " did not reach the real NCCL:\n" << logs.substr(0, 4000);
    for (const auto& op : cases[c].ours) EXPECT_EQ(realCalls(logs, op), 0u) << op << " reached the real NCCL";
  }
  EXPECT_EQ(std::system(("rm -rf " + dir).c_str()), 0);
}

// Four ranks split by parity (keys reverse the order), a fifth joins none.
TEST(NcclApiGpu, SplitByColorAndKey) {
  PB_REQUIRE_GPU_NO_INIT();
  runNcclRanks(5, [](ncclComm_t comm, int rank, int, cudaStream_t s) {
    ncclComm_t sub = nullptr;
    const int color = rank == 4 ? NCCL_SPLIT_NOCOLOR : rank % 2;
    NCCL_OK(ncclCommSplit(comm, color, -rank, &sub, nullptr));
    if (rank == 4) {
      if (sub) throw std::runtime_error("NCCL_SPLIT_NOCOLOR gave a communicator");
      return;
    }
    int subRank = -1, subSize = 0;
    NCCL_OK(ncclCommUserRank(sub, &subRank));
    NCCL_OK(ncclCommCount(sub, &subSize));
    if (subSize != 2 || subRank != (rank < 2 ? 1 : 0)) throw std::runtime_error("split ranks are not ordered by key");
    Dev<float> a(100), b(100);
    std::vector<float> h(100, static_cast<float>(rank));
    a.put(h);
    NCCL_OK(ncclAllReduce(a.p, b.p, 100, ncclFloat, ncclSum, sub, s));
    sync(comm, s);
    const float want = rank % 2 ? 1 + 3 : 0 + 2;
    expectEq(b.get(), [&](size_t) { return want; }, "allreduce in the split communicator");
    NCCL_OK(ncclCommDestroy(sub));
  });
}

// One process drives every visible GPU (at most 2): ncclCommInitAll, then a
// group of allreduces, one per communicator, from this thread.
TEST(NcclApiGpu, InitAllFromOneProcess) {
  PB_REQUIRE_GPU_NO_INIT();
  auto results = runRanks(1, std::chrono::seconds(60), [](int, int, const plugboard::UniqueId&) {
    int devices = 0;
    CUDA_OK(cudaGetDeviceCount(&devices));
    const int ndev = devices >= 2 ? 2 : 1;
    std::vector<ncclComm_t> comms(ndev);
    NCCL_OK(ncclCommInitAll(comms.data(), ndev, nullptr));
    std::vector<Dev<float>*> bufs;
    std::vector<cudaStream_t> streams(ndev);
    for (int d = 0; d < ndev; ++d) {
      CUDA_OK(cudaSetDevice(d));
      CUDA_OK(cudaStreamCreate(&streams[d]));
      bufs.push_back(new Dev<float>(1000));
      bufs.back()->put(std::vector<float>(1000, static_cast<float>(d + 1)));
    }
    NCCL_OK(ncclGroupStart());
    for (int d = 0; d < ndev; ++d) NCCL_OK(ncclAllReduce(bufs[d]->p, bufs[d]->p, 1000, ncclFloat, ncclSum, comms[d], streams[d]));
    NCCL_OK(ncclGroupEnd());
    for (int d = 0; d < ndev; ++d) {
      CUDA_OK(cudaSetDevice(d));
      sync(comms[d], streams[d]);
      expectEq(bufs[d]->get(), [&](size_t) { return ndev == 2 ? 3.0f : 1.0f; }, "InitAll allreduce");
      delete bufs[d];
      NCCL_OK(ncclCommDestroy(comms[d]));
    }
  });
  expectAllPassed(results);
}

namespace {

/// A 1000-float allreduce on comm of this rank's in(rank, i) must give the
/// sum over the (old) ranks `members`.
void checkPairSum(ncclComm_t comm, int rank, std::vector<int> members, cudaStream_t s, const std::string& what) {
  Dev<float> a(1000), b(1000);
  std::vector<float> h(1000);
  for (size_t i = 0; i < h.size(); ++i) h[i] = in(rank, i);
  a.put(h);
  NCCL_OK(ncclAllReduce(a.p, b.p, 1000, ncclFloat, ncclSum, comm, s));
  sync(comm, s);
  expectEq(b.get(), [&](size_t i) {
    float sum = 0;
    for (int m : members) sum += in(m, i);
    return sum;
  }, what);
}

}  // namespace

// ncclCommShrink: ranks 1 and 3 of 4 are excluded and take no part; the
// others get a 2-rank communicator in their old order. Bad lists and flags
// are refused before anything is exchanged.
TEST(NcclApiGpu, ShrinkLeavesTheExcludedRanksOut) {
  PB_REQUIRE_GPU_NO_INIT();
  runNcclRanks(4, [](ncclComm_t comm, int rank, int, cudaStream_t s) {
    int exclude[] = {3, 1};
    if (rank == 1 || rank == 3) return;  // excluded: they do not call it
    ncclComm_t sub = nullptr;
    int self[] = {rank};
    int twice[] = {1, 1};
    int outside[] = {4};
    if (ncclCommShrink(comm, self, 1, &sub, nullptr, NCCL_SHRINK_DEFAULT) != ncclInvalidArgument || sub)
      throw std::runtime_error("a rank that excludes itself was not refused");
    if (ncclCommShrink(comm, twice, 2, &sub, nullptr, NCCL_SHRINK_DEFAULT) != ncclInvalidArgument)
      throw std::runtime_error("a rank listed twice was not refused");
    if (ncclCommShrink(comm, outside, 1, &sub, nullptr, NCCL_SHRINK_DEFAULT) != ncclInvalidArgument)
      throw std::runtime_error("a rank outside the communicator was not refused");
    if (ncclCommShrink(comm, exclude, 2, &sub, nullptr, 7) != ncclInvalidArgument)
      throw std::runtime_error("unknown shrink flags were not refused");
    if (std::string(ncclGetLastError(comm)).find("shrinkFlags 7") == std::string::npos)
      throw std::runtime_error(std::string("ncclGetLastError does not name the flags: ") + ncclGetLastError(comm));
    NCCL_OK(ncclCommShrink(comm, exclude, 2, &sub, nullptr, NCCL_SHRINK_DEFAULT));
    int subRank = -1, subSize = 0;
    NCCL_OK(ncclCommUserRank(sub, &subRank));
    NCCL_OK(ncclCommCount(sub, &subSize));
    if (subSize != 2 || subRank != rank / 2) throw std::runtime_error("shrunk ranks are not in their old order");
    checkPairSum(sub, rank, {0, 2}, s, "allreduce in the shrunk communicator");
    NCCL_OK(ncclCommDestroy(sub));
  });
}

// NCCL_SHRINK_ABORT after a rank stopped answering: ranks 0 and 1 start an
// allreduce on the parent that rank 2 never joins, shrink it away with the
// abort flag (which ends the stuck call), and the new communicator works.
TEST(NcclApiGpu, ShrinkWithAbortRecoversFromAStuckRank) {
  PB_REQUIRE_GPU_NO_INIT();
  expectAllPassed(runNcclRanksResults(3, [](ncclComm_t comm, int rank, int, cudaStream_t s) {
    if (rank == 2) {  // stuck: joins nothing, then leaves without a word to the parent
      std::this_thread::sleep_for(std::chrono::seconds(3));
      NCCL_OK(ncclCommAbort(comm));
      return;
    }
    Dev<float> stuck(1 << 16);
    NCCL_OK(ncclAllReduce(stuck.p, stuck.p, 1 << 16, ncclFloat, ncclSum, comm, s));  // rank 2 never joins
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    int exclude[] = {2};
    ncclComm_t sub = nullptr;
    NCCL_OK(ncclCommShrink(comm, exclude, 1, &sub, nullptr, NCCL_SHRINK_ABORT));
    cudaStream_t s2;
    CUDA_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    checkPairSum(sub, rank, {0, 1}, s2, "allreduce after the aborting shrink");
    NCCL_OK(ncclCommDestroy(sub));
    NCCL_OK(ncclCommAbort(comm));  // the parent's resources, as NCCL asks
    cudaStreamSynchronize(s);      // the stuck call has ended (aborted)
    cudaStreamDestroy(s2);
  }, /*bodyEndsComm=*/true));
}

namespace {

/// Polls ncclCommGetAsyncError until it stops answering ncclInProgress (at most 60 s).
ncclResult_t waitForInit(ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (state == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
    NCCL_OK(ncclCommGetAsyncError(comm, &state));
    if (state == ncclInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return state;
}

ncclComm_t startNonBlocking(int nranks, const ncclUniqueId& id, int rank) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t r = ncclCommInitRankConfig(&comm, nranks, id, rank, &config);
  if (r != ncclInProgress || !comm)
    throw std::runtime_error("non-blocking init returned " + std::to_string(r) + ", want ncclInProgress (7)");
  return comm;
}

/// Makes rank's GPU current (ranks share the GPUs round-robin).
void useRankGpu(int rank) {
  int devices = 0;
  CUDA_OK(cudaGetDeviceCount(&devices));
  CUDA_OK(cudaSetDevice(rank % devices));
}

/// Waits for comm's non-blocking set-up, checks a 2-rank allreduce on it
/// (this rank's values as valueRank's), then finalizes and destroys it.
void checkReadyThenDestroy(ncclComm_t comm, int valueRank, const std::string& what) {
  if (waitForInit(comm) != ncclSuccess) throw std::runtime_error(what + ": set-up: " + ncclGetLastError(comm));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  checkPairSum(comm, valueRank, {0, 1}, s, "allreduce after " + what);
  NCCL_OK(ncclCommFinalize(comm));
  NCCL_OK(ncclCommDestroy(comm));
  cudaStreamDestroy(s);
}

}  // namespace

// config.blocking = 0: the init returns ncclInProgress at once; until the
// set-up is done ncclCommGetAsyncError says so and other calls are refused
// by name (rank 1 joins 500 ms late, so rank 0's set-up cannot be done
// sooner); then the communicator works.
TEST(NcclApiGpu, NonBlockingInitAnswersInProgressUntilReady) {
  PB_REQUIRE_GPU_NO_INIT();
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  expectAllPassed(runRanks(2, std::chrono::seconds(100), [&](int rank, int nranks, const plugboard::UniqueId&) {
    useRankGpu(rank);
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    ncclComm_t comm = startNonBlocking(nranks, id, rank);
    if (rank == 0) {
      ncclResult_t state = ncclSuccess;
      NCCL_OK(ncclCommGetAsyncError(comm, &state));
      if (state != ncclInProgress) throw std::runtime_error("the set-up ended before rank 1 joined");
      Dev<float> a(4);
      int count = 0;
      if (ncclCommCount(comm, &count) != ncclInvalidArgument ||
          std::string(ncclGetLastError(comm)).find("non-blocking init (config.blocking = 0) is still running") ==
              std::string::npos)
        throw std::runtime_error(std::string("a call during the set-up: ") + ncclGetLastError(comm));
    }
    checkReadyThenDestroy(comm, rank, "a non-blocking init");
  }));
}

// A split of a non-blocking communicator given no config is non-blocking
// too (NCCL's inheritance): ncclInProgress, then ready and working; a
// shrink with config.blocking = 1 completes before returning.
TEST(NcclApiGpu, NonBlockingSplitAnswersInProgressThenWorks) {
  PB_REQUIRE_GPU_NO_INIT();
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  expectAllPassed(runRanks(2, std::chrono::seconds(100), [&](int rank, int nranks, const plugboard::UniqueId&) {
    useRankGpu(rank);
    ncclComm_t parent = startNonBlocking(nranks, id, rank);
    if (waitForInit(parent) != ncclSuccess) throw std::runtime_error(std::string("parent: ") + ncclGetLastError(parent));
    ncclComm_t sub = nullptr;
    const ncclResult_t split = ncclCommSplit(parent, 0, -rank, &sub, nullptr);
    if (split != ncclInProgress || !sub)
      throw std::runtime_error("split of a non-blocking parent returned " + std::to_string(split) + ", want ncclInProgress");
    if (waitForInit(sub) != ncclSuccess) throw std::runtime_error(std::string("split: ") + ncclGetLastError(sub));
    int newRank = -1;
    NCCL_OK(ncclCommUserRank(sub, &newRank));
    if (newRank != 1 - rank) throw std::runtime_error("key -rank should reverse the ranks");
    checkReadyThenDestroy(sub, newRank, "a non-blocking split");
    ncclConfig_t blocking = NCCL_CONFIG_INITIALIZER;
    blocking.blocking = 1;
    ncclComm_t shrunk = nullptr;
    NCCL_OK(ncclCommShrink(parent, nullptr, 0, &shrunk, &blocking, NCCL_SHRINK_DEFAULT));
    ncclResult_t state = ncclInProgress;
    NCCL_OK(ncclCommGetAsyncError(shrunk, &state));
    if (state != ncclSuccess) throw std::runtime_error("a blocking shrink returned before its set-up was done");
    checkReadyThenDestroy(shrunk, rank, "a blocking shrink of a non-blocking parent");
    checkReadyThenDestroy(parent, rank, "the parent");
  }));
}

// A non-blocking init inside a group starts at ncclGroupEnd, which answers
// ncclInProgress; the communicator is then ready and works.
TEST(NcclApiGpu, NonBlockingInitInAGroupEndsInProgress) {
  PB_REQUIRE_GPU_NO_INIT();
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  expectAllPassed(runRanks(2, std::chrono::seconds(100), [&](int rank, int nranks, const plugboard::UniqueId&) {
    useRankGpu(rank);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclCommInitRankConfig(&comm, nranks, id, rank, &config));  // deferred to the group's end
    const ncclResult_t end = ncclGroupEnd();
    if (end != ncclInProgress || !comm)
      throw std::runtime_error("ncclGroupEnd of a non-blocking init returned " + std::to_string(end) + ", want 7");
    checkReadyThenDestroy(comm, rank, "a grouped non-blocking init");
  }));
}

// A non-blocking set-up that cannot finish (its peer never comes) ends in
// the "timeout" setting's time with a named failure that every later call
// repeats; one aborted while it runs returns at once and ends by itself.
TEST(NcclApiGpu, NonBlockingInitFailsByNameOrIsAborted) {
  PB_REQUIRE_GPU_NO_INIT();
  ncclUniqueId failing, aborted;
  ASSERT_EQ(ncclGetUniqueId(&failing), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(ncclGetUniqueId(&aborted), ncclSuccess) << ncclGetLastError(nullptr);
  expectAllPassed(runRanks(1, std::chrono::seconds(60), [&](int, int, const plugboard::UniqueId&) {
    CUDA_OK(cudaSetDevice(0));
    setenv("PLUGBOARD_TIMEOUT", "1", 1);
    ncclComm_t comm = startNonBlocking(2, failing, 0);  // rank 1 never joins
    const ncclResult_t state = waitForInit(comm);
    const std::string why = ncclGetLastError(comm);
    if (state == ncclSuccess || state == ncclInProgress || why.find("non-blocking init failed") == std::string::npos)
      throw std::runtime_error("set-up without its peer: " + std::to_string(state) + " " + why);
    Dev<float> a(4);
    if (ncclAllReduce(a.p, a.p, 4, ncclFloat, ncclSum, comm, nullptr) != state)
      throw std::runtime_error("a call after the failed set-up did not repeat its code");
    NCCL_OK(ncclCommDestroy(comm));
    ncclComm_t pending = startNonBlocking(2, aborted, 0);
    const auto start = std::chrono::steady_clock::now();
    NCCL_OK(ncclCommAbort(pending));
    if (std::chrono::steady_clock::now() - start > std::chrono::milliseconds(500))
      throw std::runtime_error("ncclCommAbort waited for the set-up");
    std::this_thread::sleep_for(std::chrono::seconds(3));  // the set-up gives up (1 s) and frees itself
  }));
}
