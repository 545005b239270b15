// GpuPlanExecutor: every shipped plan (plans/) on device buffers, results
// checked exactly against a host reference: memory channels (cudaipc) at 2-4
// ranks, port channels over ethernet at 2 and 3 ranks (buffers in pinned
// host memory, each kernel flushing its puts before it ends); float sum and avg,
// int32 max; counts with odd chunks, slices wider than small chunks, and
// chunks larger than one block's share; three calls in a row on one
// executor, a CUDA graph replayed with fresh inputs (simple and LL plans);
// switch channels (allreduce_switch, the peers backend where multicast is
// refused) with float16 and bfloat16 and refusals of what they cannot reduce;
// refusals by name (LL over port channels among them); a rank that skips a
// call ends the others' call in a reported timeout that names the thread
// block, operation and peer (for LL, the packets it waited for), and that
// failure reaches the peer as a reported failure; a peer's reported failure
// ends a kernel waiting for it within seconds.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "comm_fixture.hpp"
#include "gpu_test_util.hpp"
#include "multiproc.hpp"
#include "plugboard/gpu/plan_executor.hpp"

using namespace plugboard;
using namespace plugboard::test;

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

Plan shipped(const std::string& name, int n, bool port = false) {
  return loadPlan(std::string(PLUGBOARD_TEST_SOURCE_DIR) + "/../plans/" + name + "/" + (port ? "port-" : "") +
                  std::to_string(n) + "ranks.json");
}

double input(int rank, size_t i, int round) { return (rank + 1) * 7 + static_cast<int>(i % 17) + round; }

/// What rank r's output element j holds after the plan's collective.
double want(const std::string& collective, ReduceOp op, int r, int n, size_t count, size_t j, int round) {
  if (collective == "allgather") return input(static_cast<int>(j / count), j % count, round);
  if (collective == "alltoall") {
    const size_t block = count / n;
    return input(static_cast<int>(j / block), r * block + j % block, round);
  }
  double acc = input(0, j, round);
  for (int q = 1; q < n; ++q) acc = op == ReduceOp::Max ? std::max(acc, input(q, j, round)) : acc + input(q, j, round);
  return op == ReduceOp::Avg ? acc / n : acc;
}

template <typename T>
std::vector<T> inputs(int rank, size_t count, int round) {
  std::vector<T> h(count);
  for (size_t i = 0; i < count; ++i) h[i] = static_cast<T>(input(rank, i, round));
  return h;
}

template <typename T>
void expectOutput(const GpuPlanExecutor& ex, const std::vector<T>& out, ReduceOp op, int rank, int n, size_t count,
                  int round, const std::string& what) {
  const Plan& p = ex.plan();
  for (size_t j = 0; j < out.size(); ++j) {
    const double w = want(p.collective, op, rank, n, count, j, round);
    const double tolerance = op == ReduceOp::Avg ? 1e-6 * std::fabs(w) : 0;
    if (std::fabs(static_cast<double>(out[j]) - w) > tolerance)
      throw std::runtime_error(p.name + " " + what + " rank " + std::to_string(rank) + " count " + std::to_string(count) +
                               " round " + std::to_string(round) + ": element " + std::to_string(j) + " is " +
                               std::to_string(static_cast<double>(out[j])) + ", want " + std::to_string(w));
  }
}

/// Where a call's output goes: a buffer of its own (output chunks no peer
/// touches are computed there), the input's buffer (nothing may be computed
/// there early), or the executor's outputBuffer() (nothing is copied).
enum class OutputAt { Apart, Input, Storage };

/// Three calls in a row on device buffers, each checked.
template <typename T>
void runChecked(GpuPlanExecutor& ex, int rank, int n, size_t count, DataType type, ReduceOp op, cudaStream_t s,
                OutputAt where = OutputAt::Apart) {
  const Plan& p = ex.plan();
  const size_t outCount = count / p.inputChunks * p.outputChunks;
  T *in = nullptr, *out = nullptr;
  check(cudaMalloc(&in, std::max(count, outCount) * sizeof(T) + 1), "cudaMalloc");
  if (where == OutputAt::Apart) check(cudaMalloc(&out, outCount * sizeof(T) + 1), "cudaMalloc");
  if (where == OutputAt::Input) out = in;
  if (where == OutputAt::Storage) out = static_cast<T*>(ex.outputBuffer());
  for (int round = 0; round < 3; ++round) {
    const std::vector<T> h = inputs<T>(rank, count, round);
    // The plan runs on a non-blocking stream, which does not wait for the
    // legacy stream: a pageable cudaMemcpy or a cudaMemset may still be in
    // flight when it returns (the wrong values of the 64-slice runs).
    if (where != OutputAt::Input) check(cudaMemset(out, 0xff, outCount * sizeof(T)), "cudaMemset");
    check(cudaMemcpy(in, h.data(), count * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy in");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    ex.run(in, out, count, type, op, s);
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    ex.checkErrors();
    std::vector<T> got(outCount);
    check(cudaMemcpy(got.data(), out, outCount * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy out");
    const char* at = where == OutputAt::Apart ? "" : where == OutputAt::Input ? " (output = input)" : " (output = outputBuffer())";
    expectOutput(ex, got, op, rank, n, count, round, std::string(dataTypeName(type)) + " " + reduceOpName(op) + at);
  }
  cudaFree(in);
  if (where == OutputAt::Apart) cudaFree(out);
}

using RankFn = std::function<void(Communicator&, int rank, int n, cudaStream_t)>;

void runGpuPlanRanks(int n, const std::string& transports, const RankFn& fn,
                     std::map<std::string, std::string> overrides = {}) {
  expectAllPassed(runRanks(n, std::chrono::seconds(110), [&](int rank, int nranks, const UniqueId& id) {
    int devices = 0;
    check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
    check(cudaSetDevice(rank % devices), "cudaSetDevice");
    setenv("PLUGBOARD_TRANSPORTS", transports.c_str(), 1);
    CommunicatorOptions options;
    options.overrides = overrides;
    Communicator comm(loopbackBootstrap(rank, nranks, id), options);
    cudaStream_t s;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    fn(comm, rank, nranks, s);
    cudaStreamDestroy(s);
  }));
}

/// A plan with switch channels: 16-byte accesses (1024 elements a chunk),
/// the 16-bit types' sum and max (integer values, exact in both), and
/// refusals by name of what a switch cannot reduce or move.
void checkSwitchTypes(GpuPlanExecutor& ex, int rank, int n, cudaStream_t s) {
  const size_t count = ex.plan().inputChunks * 1024;
  runChecked<float>(ex, rank, n, count, DataType::Float32, ReduceOp::Sum, s);
  runChecked<__half>(ex, rank, n, count, DataType::Float16, ReduceOp::Max, s);
  runChecked<__nv_bfloat16>(ex, rank, n, count, DataType::BFloat16, ReduceOp::Sum, s);
  if (ex.takes(count, DataType::Int32, ReduceOp::Sum) || ex.takes(count, DataType::Float32, ReduceOp::Max) ||
      ex.takes(ex.plan().inputChunks * 7, DataType::Float16, ReduceOp::Sum) || !ex.takes(count, DataType::Float16, ReduceOp::Min))
    throw std::runtime_error("takes() says otherwise than the switch channels can");
  void* buf = nullptr;
  check(cudaMalloc(&buf, count * 4), "cudaMalloc");
  requireError([&] { ex.run(buf, buf, count, DataType::Int32, ReduceOp::Sum, s); }, ErrorCode::InvalidUsage,
               {"rank " + std::to_string(rank), "int32 sum", "switch channels reduce float32 sum"});
  requireError([&] { ex.run(buf, buf, ex.plan().inputChunks * 7, DataType::Float16, ReduceOp::Sum, s); },
               ErrorCode::InvalidUsage, {"move 4-byte words, and its chunks are 14 bytes"});
  cudaFree(buf);
}

void runShipped(const std::string& name, int n, bool port) {
  runGpuPlanRanks(n, port ? "ethernet" : "cudaipc,ethernet", [&](Communicator& comm, int rank, int nranks, cudaStream_t s) {
    // 7 elements per chunk: slices of 16 bytes, most of them empty; 1001: odd
    // chunk sizes; 100003: chunks larger than a slice's block share.
    const std::vector<size_t> perChunk = port ? std::vector<size_t>{7, 1001} : std::vector<size_t>{7, 1001, 100003};
    const Plan plan = shipped(name, nranks, port);
    GpuPlanExecutor ex(comm, plan, plan.inputChunks * 100003 * 8);
    for (size_t k : perChunk) {
      const size_t count = plan.inputChunks * k;
      runChecked<float>(ex, rank, nranks, count, DataType::Float32, ReduceOp::Sum, s);
      if (plan.hasSwitches()) {
        runChecked<float>(ex, rank, nranks, count, DataType::Float32, ReduceOp::Avg, s);
        continue;
      }
      if (plan.collective == "allreduce") {
        runChecked<int32_t>(ex, rank, nranks, count, DataType::Int32, ReduceOp::Max, s);
        runChecked<float>(ex, rank, nranks, count, DataType::Float32, ReduceOp::Avg, s);
      }
    }
    if (plan.hasSwitches()) checkSwitchTypes(ex, rank, nranks, s);
    // Out-of-place plans handed one buffer, and the storage's own output.
    const size_t count = plan.inputChunks * perChunk.back();
    if (!plan.inPlace && plan.inputChunks == plan.outputChunks)
      runChecked<float>(ex, rank, nranks, count, DataType::Float32, ReduceOp::Avg, s, OutputAt::Input);
    if (!plan.inPlace) runChecked<float>(ex, rank, nranks, count, DataType::Float32, ReduceOp::Avg, s, OutputAt::Storage);
  }, {{"gpu_wait_timeout", "15"}});
}

}  // namespace

class GpuPlanTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(GpuPlanTest, ShippedPlanOverMemoryChannels) {
  PB_REQUIRE_GPU_NO_INIT();
  runShipped(std::get<0>(GetParam()), std::get<1>(GetParam()), false);
}

TEST_P(GpuPlanTest, ShippedPlanOverPortChannelsAndEthernet) {
  PB_REQUIRE_GPU_NO_INIT();
  if (std::get<1>(GetParam()) > 3) GTEST_SKIP() << "port plans run at 2 and 3 ranks (time)";
  if (std::string(std::get<0>(GetParam())).find("_packets") != std::string::npos)
    GTEST_SKIP() << "LL plans run over memory channels only on GPU buffers (BadPlansAndArgumentsAreRefusedByName)";
  if (std::string(std::get<0>(GetParam())).find("_get") != std::string::npos)
    GTEST_SKIP() << "gets read over memory channels only (no port plan is shipped)";
  if (std::string(std::get<0>(GetParam())).find("_switch") != std::string::npos)
    GTEST_SKIP() << "switch channels are ordered by memory channels only (no port plan is shipped)";
  runShipped(std::get<0>(GetParam()), std::get<1>(GetParam()), true);
}

INSTANTIATE_TEST_SUITE_P(Plans, GpuPlanTest,
                         ::testing::Combine(::testing::Values("allgather_allpairs", "allgather_allpairs_get", "allgather_ring", "allreduce_allpairs", "allreduce_allpairs_blocks",
                                                              "allreduce_allpairs_packets", "allreduce_allpairs_twoshot", "allreduce_packets",
                                                              "allreduce_ring", "allreduce_switch", "alltoall_allpairs"),
                                            ::testing::Values(2, 3, 4)),
                         [](const auto& info) { return std::get<0>(info.param) + "_" + std::to_string(std::get<1>(info.param)); });

// A GPU plan executor the program made itself, after its pair failed
// (issue 15 item 9): two ranks, the pair on faulty over ethernet (rule
// [faulty, ethernet], failover on, CUDA memory staged); rank 1's 60th
// operation fails inside a run of the all-pairs port plan. Each rank's run
// ends with an error naming rank 1; every rank calls recover(), which
// moves the pair's host and CUDA memory to ethernet, and then makes a new
// executor, whose runs are checked.
TEST(GpuPlan, RecoverMovesAFailedPairAndANewExecutorRuns) {
  PB_REQUIRE_GPU_NO_INIT();
#ifndef PLUGBOARD_FAULTY_DIR
  GTEST_SKIP() << "the faulty plugin is not built";
#else
  expectAllPassed(runRanks(2, std::chrono::seconds(110), [](int rank, int n, const UniqueId& id) {
    int devices = 0;
    check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
    check(cudaSetDevice(rank % devices), "cudaSetDevice");
    setenv("PLUGBOARD_PLUGIN_PATH", PLUGBOARD_FAULTY_DIR, 1);
    setenv("PLUGBOARD_TRANSPORTS", "faulty,ethernet", 1);
    setenv("PLUGBOARD_FAULTY_INNER", "ethernet", 1);
    setenv("PLUGBOARD_FAULTY_FAULT", "fail_op", 1);
    setenv("PLUGBOARD_FAULTY_RANKS", "1", 1);
    setenv("PLUGBOARD_FAULTY_AFTER", "60", 1);
    CommunicatorOptions options;
    options.config = Config::fromYamlText("failover: true\ntimeout: 10\ngpu_wait_timeout: 10\nrules:\n"
                                          "  - peers: any\n    use: [faulty, ethernet]\n", "recover-test.yaml");
    Communicator comm(loopbackBootstrap(rank, n, id), options);
    cudaStream_t s;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    const Plan plan = shipped("allreduce_allpairs", n, true);
    const size_t count = plan.inputChunks * 100003;
    auto ex = std::make_unique<GpuPlanExecutor>(comm, plan, count * sizeof(float));
    const auto start = std::chrono::steady_clock::now();
    try {
      for (int i = 0; i < 40; ++i) runChecked<float>(*ex, rank, n, count, DataType::Float32, ReduceOp::Sum, s);
      throw std::runtime_error("rank " + std::to_string(rank) + ": no run failed");
    } catch (const Error& e) {
      const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("rank %d after %.2f s: %s\n", rank, took, e.what());
      if (std::string(e.what()).find("rank 1") == std::string::npos)
        throw std::runtime_error("rank " + std::to_string(rank) + ": the error does not name rank 1: " + e.what());
      // The notice ends the peer's waits, its port flushes among them, not its wait timeout.
      if (took > comm.config().getDouble("gpu_wait_timeout") / 2)
        throw std::runtime_error("rank " + std::to_string(rank) + " learnt of the failure after " +
                                 std::to_string(took) + " s");
    }
    const std::vector<int> moved = comm.recover();
    if (moved != std::vector<int>{1 - rank} || comm.transportFor(1 - rank, MemoryKind::Cuda) != "ethernet" ||
        comm.transportFor(1 - rank, MemoryKind::Host) != "ethernet")
      throw std::runtime_error("rank " + std::to_string(rank) + ": recover() moved " + std::to_string(moved.size()) +
                               " pair(s); CUDA memory goes over " + comm.transportFor(1 - rank, MemoryKind::Cuda));
    ex = std::make_unique<GpuPlanExecutor>(comm, plan, count * sizeof(float));
    runChecked<float>(*ex, rank, n, count, DataType::Float32, ReduceOp::Sum, s);
    runChecked<int32_t>(*ex, rank, n, count, DataType::Int32, ReduceOp::Max, s);
    ex.reset();
    cudaStreamDestroy(s);
  }));
#endif
}

class GpuPlanGraphTest : public ::testing::TestWithParam<std::string> {};

// LL plans count their calls on the device: a replayed graph flags each
// replay's packets anew (a flag baked into the launch would match stale packets).
TEST_P(GpuPlanGraphTest, CapturedGraphReplaysWithFreshInputs) {
  PB_REQUIRE_GPU_NO_INIT();
  const std::string name = GetParam();
  runGpuPlanRanks(2, "cudaipc,ethernet", [&](Communicator& comm, int rank, int n, cudaStream_t s) {
    GpuPlanExecutor ex(comm, shipped(name, n), 1 << 20);
    const size_t count = 2 * 4099;
    float *in = nullptr, *out = nullptr;
    check(cudaMalloc(&in, count * sizeof(float)), "cudaMalloc");
    check(cudaMalloc(&out, count * sizeof(float)), "cudaMalloc");
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    ex.run(in, out, count, DataType::Float32, ReduceOp::Sum, s);
    check(cudaStreamEndCapture(s, &graph), "cudaStreamEndCapture");
    check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
    for (int round = 0; round < 3; ++round) {
      const std::vector<float> h = inputs<float>(rank, count, round);
      check(cudaMemcpyAsync(in, h.data(), count * sizeof(float), cudaMemcpyHostToDevice, s), "cudaMemcpyAsync");
      check(cudaGraphLaunch(exec, s), "cudaGraphLaunch");
      check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
      ex.checkErrors();
      std::vector<float> got(count);
      check(cudaMemcpy(got.data(), out, count * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
      expectOutput(ex, got, ReduceOp::Sum, rank, n, count, round, "graph");
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaFree(in);
    cudaFree(out);
  });
}

INSTANTIATE_TEST_SUITE_P(Plans, GpuPlanGraphTest, ::testing::Values("allreduce_ring", "allreduce_packets"));

TEST(GpuPlan, InstancesAreSlicesAtLeast) {
  PB_REQUIRE_GPU_NO_INIT();
  runGpuPlanRanks(2, "cudaipc,ethernet", [](Communicator& comm, int rank, int n, cudaStream_t s) {
    Plan plan = shipped("allreduce_packets", n);
    plan.instances = 4;
    GpuPlanExecutor ex(comm, plan, 1 << 20);
    if (ex.slices() != 4) throw std::runtime_error("4 instances over gpu_plan_slices=1 gave " + std::to_string(ex.slices()) + " slices");
    runChecked<float>(ex, rank, n, 2 * 100003, DataType::Float32, ReduceOp::Sum, s);
  }, {{"gpu_plan_slices", "1"}});
}

TEST(GpuPlan, BadPlansAndArgumentsAreRefusedByName) {
  PB_REQUIRE_GPU_NO_INIT();
  runGpuPlanRanks(2, "ethernet", [](Communicator& comm, int, int, cudaStream_t s) {
    requireError([&] { GpuPlanExecutor(comm, shipped("allreduce_ring", 3), 1024); }, ErrorCode::InvalidUsage,
                 {"the plan is for 3 ranks, the communicator has 2"});
    requireError([&] { GpuPlanExecutor(comm, shipped("allgather_ring", 2), 1024); }, ErrorCode::InvalidUsage,
                 {"is a memory channel", "does not map peer memory", "ethernet"});
    requireError([&] { GpuPlanExecutor(comm, shipped("allreduce_packets", 2, true), 1024); }, ErrorCode::InvalidUsage,
                 {"is a port channel", "LL packets on GPU buffers travel over memory channels only"});
    GpuPlanExecutor ex(comm, shipped("allreduce_ring", 2, true), 1024);
    float* buf = nullptr;
    check(cudaMalloc(&buf, 4096), "cudaMalloc");
    requireError([&] { ex.run(buf, buf, 5, DataType::Float32, ReduceOp::Sum, s); }, ErrorCode::InvalidUsage,
                 {"5 elements do not cut into 2 equal input chunks"});
    requireError([&] { ex.run(buf, buf, 1000, DataType::Float32, ReduceOp::Sum, s); }, ErrorCode::InvalidUsage,
                 {"4000 bytes of input, more than the 1024"});
    requireError([&] { ex.run(ex.outputBuffer(), buf, 2, DataType::Float32, ReduceOp::Sum, s); }, ErrorCode::InvalidUsage,
                 {"outputBuffer() cannot be the input"});
    cudaFree(buf);
  });
}

/// Polls Communicator::peerFailure for up to 10 s.
Error awaitPeerFailure(Communicator& comm) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto notice = comm.peerFailure()) return *notice;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  throw std::runtime_error("no reported failure within 10 s");
}

/// Two ranks make an executor of plan `name` (inputs up to 4 KiB) and run
/// it once (100 floats); then next(comm, rank, executor, in, out, stream)
/// runs on each rank, and a barrier ends it.
using AfterFn = std::function<void(Communicator&, int rank, GpuPlanExecutor&, float* in, float* out, cudaStream_t)>;
void afterOneCall(const std::string& name, const std::string& waitTimeout, const AfterFn& next) {
  runGpuPlanRanks(
      2, "cudaipc,ethernet",
      [&](Communicator& comm, int rank, int, cudaStream_t s) {
        GpuPlanExecutor ex(comm, shipped(name, 2), 4096);
        float *in = nullptr, *out = nullptr;
        check(cudaMalloc(&in, 4096), "cudaMalloc");
        check(cudaMalloc(&out, 8192), "cudaMalloc");
        ex.run(in, out, 100, DataType::Float32, ReduceOp::Sum, s);
        check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
        ex.checkErrors();
        next(comm, rank, ex, in, out, s);
        comm.bootstrap().barrier();
        cudaFree(in);
        cudaFree(out);
      },
      {{"gpu_wait_timeout", waitTimeout}});
}

/// Rank 1 skips a call of plan `name` that rank 0 makes, whose error must
/// hold every fragment; rank 0's failure reaches rank 1 as a reported
/// failure (whenFailing's default).
void skipACall(const std::string& name, std::vector<std::string> fragments) {
  afterOneCall(name, "0.5", [&](Communicator& comm, int rank, GpuPlanExecutor& ex, float* in, float* out, cudaStream_t s) {
    if (rank == 0) {
      ex.run(in, out, 100, DataType::Float32, ReduceOp::Sum, s);  // rank 1 skips it
      check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
      requireError([&] { ex.checkErrors(); }, ErrorCode::Timeout, fragments);
    } else {
      const Error told = awaitPeerFailure(comm);
      requireError([&] { throw told; }, ErrorCode::Remote, {"rank 1 (host", "rank 0 (host", fragments.back()});
    }
  });
}

TEST(GpuPlan, RankSkippingACallEndsInATimeoutNamingTheWait) {
  PB_REQUIRE_GPU_NO_INIT();
  skipACall("allgather_ring",
            {"rank 0 (GPU plan allgather_ring", "the start handshake", "to rank 1", "gave up after gpu_wait_timeout"});
}

TEST(GpuPlan, RankSkippingAnLlCallEndsInATimeoutNamingThePackets) {
  PB_REQUIRE_GPU_NO_INIT();
  skipACall("allreduce_packets",
            {"rank 0 (GPU plan allreduce_packets", "(reduce_packet)", "waiting for packets[1] from rank 1", "never sent them"});
}

// Rank 1 skips a call and reports a failure instead (gpu_wait_timeout 20 s):
// rank 0's kernel ends within seconds, in the user's cudaStreamSynchronize
// (only the communicator's notice watcher can end it there), and
// checkErrors() and the next run throw rank 1's reason.
TEST(GpuPlan, APeersReportedFailureEndsARunWaitingForIt) {
  PB_REQUIRE_GPU_NO_INIT();
  for (const char* name : {"allgather_ring", "allreduce_packets"}) {
    afterOneCall(name, "20", [&](Communicator& comm, int rank, GpuPlanExecutor& ex, float* in, float* out, cudaStream_t s) {
      if (rank == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        comm.reportFailure("rank 1 found its input corrupt");
        return;
      }
      const auto start = std::chrono::steady_clock::now();
      ex.run(in, out, 100, DataType::Float32, ReduceOp::Sum, s);  // rank 1 skips it
      check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
      const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("%s: rank 0's kernel ended %.3f s after its call (its limit: 20 s)\n", name, took);
      if (took > 5) throw std::runtime_error("the kernel ended only after " + std::to_string(took) + " s");
      const std::vector<std::string> named{"rank 0 (host", "rank 1 (host", "found its input corrupt"};
      requireError([&] { ex.checkErrors(); }, ErrorCode::Remote, named);
      requireError([&] { ex.run(in, out, 100, DataType::Float32, ReduceOp::Sum, s); }, ErrorCode::Remote, named);
    });
  }
}
