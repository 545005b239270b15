// The NCCL API library's pure parts (type and op mapping, the p2p
// schedule) and, where the library is built, its C entry points that need
// no GPU: versions, error texts, argument errors, init without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "fallback_calls.hpp"
#include "nccl_types.hpp"
#include "p2p_schedule.hpp"
#include "premul_sum_ops.hpp"
#include "plugboard/error.hpp"

using namespace plugboard;
using namespace plugboard::ncclapi;

TEST(NcclTypes, EveryNcclTypeMapsToTheTypeOfItsWidthAndKind) {
  const std::vector<std::pair<DataType, size_t>> want = {
      {DataType::Int8, 1},    {DataType::Uint8, 1},   {DataType::Int32, 4},    {DataType::Uint32, 4},
      {DataType::Int64, 8},   {DataType::Uint64, 8},  {DataType::Float16, 2},  {DataType::Float32, 4},
      {DataType::Float64, 8}, {DataType::BFloat16, 2}, {DataType::Float8E4M3, 1}, {DataType::Float8E5M2, 1}};
  for (int t = 0; t < 12; ++t) {
    ASSERT_TRUE(toDataType(t).has_value()) << t;
    EXPECT_EQ(*toDataType(t), want[t].first) << t;
    EXPECT_EQ(dataTypeSize(*toDataType(t)), want[t].second) << t;
  }
  EXPECT_FALSE(toDataType(12));
  EXPECT_FALSE(toDataType(-1));
}

TEST(NcclTypes, OpsMapByNcclsNumbersAndPreMulSumIsRefused) {
  EXPECT_EQ(*toReduceOp(0), ReduceOp::Sum);
  EXPECT_EQ(*toReduceOp(1), ReduceOp::Prod);
  EXPECT_EQ(*toReduceOp(2), ReduceOp::Max);  // NCCL: Max before Min
  EXPECT_EQ(*toReduceOp(3), ReduceOp::Min);
  EXPECT_EQ(*toReduceOp(4), ReduceOp::Avg);
  EXPECT_FALSE(toReduceOp(5));       // ncclNumOps: the first PreMulSum op id
  EXPECT_FALSE(toReduceOp(0x7fffffff));
}

TEST(NcclPreMulSumOps, NumbersStartAtNcclNumOpsAndAreReusedOnceDestroyed) {
  PreMulSumOps ops;
  PreMulSum half;
  half.type = DataType::Float16;
  PreMulSum onDevice;
  onDevice.scalarOnDevice = true;
  EXPECT_EQ(*ops.add(half), 5);  // nccl.h's ncclNumOps
  EXPECT_EQ(*ops.add(onDevice), 6);
  EXPECT_EQ(*ops.add(half), 7);
  EXPECT_EQ(ops.find(6)->scalarOnDevice, true);
  EXPECT_EQ(ops.find(7)->type, DataType::Float16);
  EXPECT_FALSE(ops.find(4));  // a built-in op is never a PreMulSum op
  EXPECT_TRUE(ops.remove(6));
  EXPECT_FALSE(ops.remove(6)) << "destroyed twice";
  EXPECT_FALSE(ops.find(6));
  EXPECT_EQ(*ops.add(onDevice), 6) << "the lowest free number is given out again";
  EXPECT_EQ(ops.size(), 3u);
}

TEST(NcclTypes, ByteCountRefusesOverflow) {
  EXPECT_EQ(*byteCount(3, DataType::Float64), 24u);
  EXPECT_FALSE(byteCount(SIZE_MAX / 2, DataType::Int32));
  EXPECT_EQ(*byteCount(SIZE_MAX, DataType::Uint8), SIZE_MAX);
}

namespace {

/// A message between two ranks: from, to, and which of their messages (j).
using MessageKey = std::tuple<int, int, int>;
/// Where a rank's schedule puts a message: (distance k, index among the rank's steps of distance k).
using StepKey = std::pair<int, int>;

/// The step key of each message end in rank's schedule; checks every op is
/// in one step and the keys increase along the schedule.
std::map<MessageKey, StepKey> stepKeys(int rank, int n, const std::vector<P2POp>& ops) {
  std::map<MessageKey, StepKey> at;
  std::map<std::pair<int, int>, int> seen;
  std::vector<int> perDistance(n, 0);
  std::set<int> used;
  StepKey last{-1, -1};
  for (const P2PStep& step : scheduleP2P(rank, n, ops)) {
    const P2POp& any = ops[step.send >= 0 ? step.send : step.recv];
    const int k = any.isSend ? (any.peer - rank + n) % n : (rank - any.peer + n) % n;
    const StepKey key{k, perDistance[k]++};
    EXPECT_LT(last, key) << "rank " << rank << ": steps out of order";
    last = key;
    for (int i : {step.send, step.recv}) {
      if (i < 0) continue;
      EXPECT_TRUE(used.insert(i).second) << "op " << i << " scheduled twice";
      const int from = ops[i].isSend ? rank : ops[i].peer, to = ops[i].isSend ? ops[i].peer : rank;
      at[{from, to, seen[{from, to}]++}] = key;
    }
  }
  EXPECT_EQ(used.size(), ops.size());
  return at;
}

}  // namespace

// Random groups on 2-6 ranks, ops in any call order: every op is in one
// step, each rank's steps go in increasing (distance, index) order, and the
// two ends of every message sit at the same key, so a rank waits only on
// peers at its own key and no order of calls deadlocks.
TEST(NcclP2PSchedule, BothEndsOfEveryMessageMeetAtTheSameKey) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 2 + static_cast<int>(rng() % 5);
    std::vector<std::vector<P2POp>> ops(n);
    for (int m = 0, msgs = static_cast<int>(rng() % 12); m < msgs; ++m) {
      const int a = static_cast<int>(rng() % n), b = static_cast<int>(rng() % n);
      ops[a].push_back({true, b});
      ops[b].push_back({false, a});
    }
    for (auto& v : ops) std::shuffle(v.begin(), v.end(), rng);
    std::vector<std::map<MessageKey, StepKey>> at(n);
    for (int r = 0; r < n; ++r) at[r] = stepKeys(r, n, ops[r]);
    for (int r = 0; r < n; ++r)
      for (const auto& [msg, key] : at[r]) {
        const int other = std::get<0>(msg) == r ? std::get<1>(msg) : std::get<0>(msg);
        ASSERT_TRUE(at[other].count(msg)) << "trial " << trial << ": a message is missing at rank " << other;
        EXPECT_EQ(at[other].at(msg), key) << "trial " << trial << ": the ends of a message meet at different steps";
      }
  }
}

TEST(NcclP2PSchedule, SelfMessagesPairAsCopiesAndBadPeersAreNamed) {
  const std::vector<P2PStep> steps = scheduleP2P(1, 3, {{false, 1}, {true, 2}, {true, 1}, {false, 0}});
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_TRUE(steps[0].self);
  EXPECT_EQ(steps[0].send, 2);
  EXPECT_EQ(steps[0].recv, 0);
  EXPECT_EQ(steps[1].send, 1);  // to 2 and from 0: distance 1, one fused step
  EXPECT_EQ(steps[1].recv, 3);
  try {
    scheduleP2P(0, 2, {{true, 2}});
    FAIL() << "peer 2 of 2 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ncclSend peer 2 is out of range [0, 2)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(scheduleP2P(0, 2, {{true, 0}}), Error);  // a send to itself with no receive
}

TEST(NcclFallbackCalls, ParsesNamesAndAllAndNamesABadWord) {
  const auto some = FallbackCalls::parse(" AllReduce, sendrecv ,,");
  EXPECT_TRUE(some.has(FallbackCall::AllReduce));
  EXPECT_TRUE(some.has(FallbackCall::SendRecv));
  EXPECT_FALSE(some.has(FallbackCall::AllGather));
  EXPECT_EQ(some.describe(), "allreduce, sendrecv");
  EXPECT_TRUE(FallbackCalls::parse("").empty());
  EXPECT_EQ(FallbackCalls::parse("").describe(), "none");
  const auto all = FallbackCalls::parse("all");
  for (auto c : {FallbackCall::AllReduce, FallbackCall::Broadcast, FallbackCall::Reduce, FallbackCall::AllGather,
                 FallbackCall::ReduceScatter, FallbackCall::AllToAll, FallbackCall::SendRecv})
    EXPECT_TRUE(all.has(c)) << fallbackCallName(c);
  try {
    FallbackCalls::parse("allreduce,allgathr");
    FAIL() << "a misspelt call was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Config);
    EXPECT_NE(std::string(e.what()).find("nccl_fallback_calls = 'allreduce,allgathr': 'allgathr' is not one of"),
              std::string::npos)
        << e.what();
  }
}

#ifdef PLUGBOARD_TEST_NCCL_API
#include <cuda_runtime.h>
#include <dlfcn.h>

#include "nccl.h"
#include "nccl_library.hpp"

// nccl_fallback_library must never take this library for the real NCCL:
// "libnccl.so.2" through the dynamic linker may well be it.
TEST(NcclApi, FallbackLoaderRefusesThisLibrary) {
  NcclLoadRules rules;
  rules.remedy = "nccl_fallback_library";
  // No RTLD_DEEPBIND here: sanitizer runtimes refuse it, and the refusal does not depend on it.
  rules.refuseVersionFunction = reinterpret_cast<const void*>(&ncclGetVersion);
  try {
    NcclLibrary::load(PLUGBOARD_TEST_NCCL_LIB, "nccl_fallback_library", rules);
    FAIL() << "Plugboard's own NCCL API library was loaded as the real NCCL";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Config);
    EXPECT_NE(std::string(e.what()).find("is Plugboard's own NCCL API library, not a real NCCL"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("fix nccl_fallback_library"), std::string::npos) << e.what();
  }
}

TEST(NcclApi, VersionErrorStringsAndArgumentErrorsNeedNoGpu) {
  int v = 0;
  ASSERT_EQ(ncclGetVersion(&v), ncclSuccess);
  EXPECT_EQ(v, NCCL_VERSION_CODE);
  EXPECT_EQ(v, 22200);
  EXPECT_EQ(ncclGetVersion(nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("version is NULL"), std::string::npos);
  for (int r = 0; r < ncclNumResults; ++r) EXPECT_GT(std::string(ncclGetErrorString(static_cast<ncclResult_t>(r))).size(), 3u);
  EXPECT_EQ(ncclAllReduce(nullptr, nullptr, 1, ncclFloat, ncclSum, nullptr, nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("ncclAllReduce: comm is NULL"), std::string::npos);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("without ncclGroupStart"), std::string::npos);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);  // an empty group
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  EXPECT_EQ(ncclCommInitRank(&comm, 2, id, 2), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("rank 2 is out of range [0, 2)"), std::string::npos);
  EXPECT_EQ(ncclCommDestroy(nullptr), ncclSuccess);
}

// Every NCCL symbol PyTorch 2.11's libtorch_cuda.so needs (nm -D
// --undefined-only, tests/gpu/run.sh step torch-nccl-symbols): Python loads
// it with RTLD_NOW, so one missing symbol stops `import torch`.
TEST(NcclApi, ExportsEverySymbolPyTorchNeeds) {
  void* lib = dlopen(PLUGBOARD_TEST_NCCL_LIB, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  for (const char* name :
       {"ncclAllGather", "ncclAllReduce", "ncclAlltoAll", "ncclBcast", "ncclBroadcast", "ncclCommAbort", "ncclCommCount",
        "ncclCommDeregister", "ncclCommDestroy", "ncclCommFinalize", "ncclCommGetAsyncError", "ncclCommInitAll",
        "ncclCommInitRank", "ncclCommInitRankConfig", "ncclCommInitRankScalable", "ncclCommRegister", "ncclCommShrink",
        "ncclCommSplit", "ncclCommUserRank", "ncclCommWindowDeregister", "ncclCommWindowRegister", "ncclDevCommCreate",
        "ncclDevCommDestroy", "ncclGetErrorString", "ncclGetLastError", "ncclGetUniqueId", "ncclGetVersion",
        "ncclGroupEnd", "ncclGroupSimulateEnd", "ncclGroupStart", "ncclMemAlloc", "ncclMemFree", "ncclRecv",
        "ncclRedOpCreatePreMulSum", "ncclRedOpDestroy", "ncclReduce", "ncclReduceScatter", "ncclSend",
        "ncclCommCuDevice"})
    EXPECT_NE(dlsym(lib, name), nullptr) << name;
  EXPECT_EQ(ncclDevCommCreate(nullptr, nullptr, nullptr), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("not served"), std::string::npos);
  // Windows are served since session 34 (accepted, changing nothing).
  EXPECT_EQ(ncclCommWindowRegister(nullptr, nullptr, 0, nullptr, NCCL_WIN_COLL_SYMMETRIC), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("comm is NULL"), std::string::npos);
  // Served since session 20: its argument checks answer without a GPU.
  EXPECT_EQ(ncclCommShrink(nullptr, nullptr, 0, nullptr, nullptr, 0), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("comm"), std::string::npos);
  dlclose(lib);
}

TEST(NcclApi, InitWithoutAGpuSaysSo) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) GTEST_SKIP() << "a CUDA device is present";
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = reinterpret_cast<ncclComm_t>(1);
  EXPECT_EQ(ncclCommInitRank(&comm, 1, id, 0), ncclUnhandledCudaError);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("no CUDA device is visible"), std::string::npos);
}
#endif
