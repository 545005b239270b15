// YAML `plans:` rules inside GpuCollectives: calls that a rule serves run
// its plan (GpuPlanExecutor), the rest the built-in kernels; every result
// checked against the host reference, and the plans' call count shows
// which path ran. Ranks share GPUs where there are fewer (run under MPS).
// A failed plan call ends the peers' plan calls with its notice.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "gpu_coll_check.hpp"
#include "gpu_test_util.hpp"

using namespace plugboard;
using namespace plugboard::test;

namespace {

/// Writes a config whose rules name the shipped 2-rank plans; returns its path.
std::string writeRules() {
  const std::string plans = std::string(PLUGBOARD_TEST_SOURCE_DIR) + "/../plans/";
  const std::string path = "/tmp/plugboard-plan-rules-" + std::to_string(getpid()) + ".yaml";
  std::ofstream(path) << "plans:\n"
                      << "  - {collective: allreduce, mem: gpu, max_bytes: 1M, file: " << plans
                      << "allreduce_allpairs/2ranks.json}\n"
                      << "  - {collective: allgather, mem: gpu, file: " << plans << "allgather_ring/2ranks.json}\n"
                      << "  - {collective: alltoall, mem: host, file: " << plans << "alltoall_allpairs/2ranks.json}\n";
  return path;
}

/// A config whose one rule runs GPU allreduces on the switch plan.
std::string writeSwitchRule() {
  const std::string path = "/tmp/plugboard-switch-rule-" + std::to_string(getpid()) + ".yaml";
  std::ofstream(path) << "plans:\n  - {collective: allreduce, mem: gpu, file: " << PLUGBOARD_TEST_SOURCE_DIR
                      << "/../plans/allreduce_switch/2ranks.json}\n";
  return path;
}

}  // namespace

// allreduce_switch (switch channels; the peers backend where multicast is
// refused) serves the types and ops its switch reduces; int32, float max
// and chunks of 16-bit types that are not whole words take the built-in
// kernels on both ranks alike. Every result checked.
TEST(GpuPlanSelection, ASwitchPlanServesWhatItsSwitchReducesAndTheRestFallsBack) {
  PB_REQUIRE_GPU_NO_INIT();
  runGpuRanks(2, {{"gpu_plan_max_bytes", "262144"}}, [](GpuCollectives& g, int rank, int n, cudaStream_t s) {
    // Allreduces of 2 types x 2 ops x 2 counts x 2 placements: 16 calls.
    reducingMatrix(g, rank, n, s, {DataType::Float32, DataType::BFloat16}, {ReduceOp::Sum, ReduceOp::Avg}, {3000, 50000});
    const uint64_t served = g.callsServedByPlans();
    if (served != 16) throw std::runtime_error("the switch plan served " + std::to_string(served) + " allreduces, want 16");
    // 3002 bfloat16 elements: chunks of 3002 bytes, not whole words.
    reducingMatrix(g, rank, n, s, {DataType::Int32, DataType::Float32, DataType::BFloat16}, {ReduceOp::Max}, {3002});
    reducingMatrix(g, rank, n, s, {DataType::Int32}, {ReduceOp::Sum}, {3000});
    if (g.callsServedByPlans() != served)
      throw std::runtime_error("the switch plan served " + std::to_string(g.callsServedByPlans() - served) +
                               " calls its switch cannot reduce or move");
  }, std::chrono::seconds(110), [](int, std::map<std::string, std::string>&) {
    static const std::string path = writeSwitchRule();
    setenv("PLUGBOARD_CONFIG", path.c_str(), 1);
  });
}

TEST(GpuPlanSelection, RulesRunPlansInsideGpuCollectivesAndResultsMatchTheReference) {
  PB_REQUIRE_GPU_NO_INIT();
  runGpuRanks(2, {{"gpu_plan_max_bytes", "262144"}}, [](GpuCollectives& g, int rank, int n, cudaStream_t s) {
    // 3000 and 50000 elements cut into the plans' chunks (up to 256 KiB of
    // input: the executors' capacity); 1001 does not, 400000 floats exceed
    // the capacity: built-in kernels.
    reducingMatrix(g, rank, n, s, {DataType::Float32, DataType::BFloat16, DataType::Int32},
                   {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Avg}, {1001, 3000, 50000, 400000});
    const uint64_t afterReducing = g.callsServedByPlans();
    if (afterReducing == 0) throw std::runtime_error("no allreduce ran on the plan");
    movingMatrix(g, rank, n, s, {DataType::Float32, DataType::Uint8}, {1001, 3000, 20000});
    if (g.callsServedByPlans() == afterReducing) throw std::runtime_error("no allgather ran on the plan");
    // The alltoall rule is for host buffers only: nothing more here.
    const uint64_t before = g.callsServedByPlans();
    void* d = nullptr;
    check(cudaMalloc(&d, 4096 * n), "cudaMalloc");
    g.allToAll(d, d, 4096, DataType::Uint8, s);
    g.synchronize(s);
    cudaFree(d);
    if (g.callsServedByPlans() != before) throw std::runtime_error("a host-only rule served a GPU alltoall");
  }, std::chrono::seconds(110), [](int, std::map<std::string, std::string>&) {
    static const std::string path = writeRules();
    setenv("PLUGBOARD_CONFIG", path.c_str(), 1);
  });
}

// With failover on and the pair over ethernet (through the proxy), every
// call takes the host relay, which fails over; the rules are set aside.
// Results checked on every path: the 400000-float calls go as relayed pieces.
TEST(GpuPlanSelection, FailoverOverTheProxySetsThePlansAside) {
  PB_REQUIRE_GPU_NO_INIT();
  runGpuRanks(2, {{"transports", "ethernet"}, {"failover", "true"}}, [](GpuCollectives& g, int rank, int n,
                                                                       cudaStream_t s) {
    reducingMatrix(g, rank, n, s, {DataType::Float32, DataType::BFloat16, DataType::Int32},
                   {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Avg}, {1001, 3000, 400000});
    movingMatrix(g, rank, n, s, {DataType::Float32, DataType::Uint8}, {1001, 3000, 1500000});
    if (g.callsServedByPlans() != 0)
      throw std::runtime_error("plans served " + std::to_string(g.callsServedByPlans()) + " calls with failover on");
  }, std::chrono::seconds(110), [](int, std::map<std::string, std::string>&) {
    static const std::string path = writeRules();
    setenv("PLUGBOARD_CONFIG", path.c_str(), 1);
  });
}

// A plan call that fails tells the peers as a built-in call does, and their
// plan kernels hear it. Two ranks (gpu_wait_timeout 4 s): rank 1 calls an
// allgather (the ring plan) that rank 0 never makes and gives up at 4 s;
// rank 0 calls an allreduce (the all-pairs plan) 2.5 s later, which rank 1
// never joins, so its own limit would end its wait at 6.5 s: it must end
// soon after 4 s with rank 1's notice.
TEST(GpuPlanSelection, AFailedPlanCallEndsThePeersPlanCalls) {
  PB_REQUIRE_GPU_NO_INIT();
  const Settings settings{{"gpu_wait_timeout", "4"}, {"gpu_plan_max_bytes", "262144"}};
  runGpuRanks(2, settings, [](GpuCollectives& g, int rank, int, cudaStream_t s) {
    g.communicator().bootstrap().barrier();
    void* buf = nullptr;
    check(cudaMalloc(&buf, 2 * 3000 * 4), "cudaMalloc");
    if (rank == 1) {
      g.allGather(buf, buf, 3000, DataType::Float32, s);
      if (g.callsServedByPlans() != 1) throw std::runtime_error("the allgather did not run on the plan");
      requireError([&] { g.synchronize(s); }, ErrorCode::Timeout, {"rank 1 (GPU plan allgather_ring", "gave up"});
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));
      const auto start = std::chrono::steady_clock::now();
      g.allReduce(buf, buf, 3000, DataType::Float32, ReduceOp::Sum, s);
      if (g.callsServedByPlans() != 1) throw std::runtime_error("the allreduce did not run on the plan");
      requireError([&] { g.synchronize(s); }, ErrorCode::Remote,
                   {"rank 0", "rank 1 (host", "told its peers", "GPU plan allgather_ring"});
      const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("rank 0 learned of rank 1's failed plan call %.2f s after its call (its own limit: 4 s)\n", took);
      if (took > 3.5) throw std::runtime_error("rank 0 learned of rank 1's failure only after " + std::to_string(took) + " s");
    }
    cudaFree(buf);
  }, std::chrono::seconds(55), [](int, std::map<std::string, std::string>&) {
    static const std::string path = writeRules();
    setenv("PLUGBOARD_CONFIG", path.c_str(), 1);
  });
}
