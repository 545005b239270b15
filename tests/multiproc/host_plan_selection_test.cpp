// Plans chosen by YAML `plans:` rules run inside HostCollectives calls:
// results checked; calls outside a rule's size range, and counts that do
// not cut into the plan's chunks, take the built-in algorithm; a rule whose
// plan is for another collective, or has switch channels on a rule for
// host buffers, fails the set-up naming the rule.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "comm_fixture.hpp"
#include "multiproc.hpp"
#include "plugboard/host_collectives.hpp"

using namespace plugboard;
using namespace plugboard::test;

namespace {

std::string plansDir() { return std::string(PLUGBOARD_TEST_SOURCE_DIR) + "/../plans/"; }

CommunicatorOptions withPlans(const std::string& yaml) {
  CommunicatorOptions o;
  o.config = Config::fromYamlText(yaml, plansDir() + "test.yaml");
  o.overrides = {{"transports", "ethernet"}, {"timeout", "20"}};
  return o;
}

void checkAllReduce(HostCollectives& hc, int rank, int n, size_t count, bool inPlace) {
  std::vector<float> in(count), out(count, -1.0f);
  for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(rank + 1) + static_cast<float>(i % 13);
  float* dst = inPlace ? in.data() : out.data();
  hc.allReduce(in.data(), dst, count, DataType::Float32, ReduceOp::Sum);
  for (size_t i = 0; i < count; ++i) {
    const float want = static_cast<float>(n * (n + 1) / 2) + static_cast<float>(n) * static_cast<float>(i % 13);
    if (dst[i] != want)
      throw std::runtime_error("rank " + std::to_string(rank) + " count " + std::to_string(count) + ": element " +
                               std::to_string(i) + " is " + std::to_string(dst[i]) + ", want " + std::to_string(want));
  }
}

void checkAllGather(HostCollectives& hc, int rank, int n, size_t count) {
  std::vector<int32_t> in(count), out(count * n, -1);
  for (size_t i = 0; i < count; ++i) in[i] = rank * 1000 + static_cast<int32_t>(i);
  hc.allGather(in.data(), out.data(), count, DataType::Int32);
  for (size_t j = 0; j < out.size(); ++j)
    if (out[j] != static_cast<int32_t>(j / count) * 1000 + static_cast<int32_t>(j % count))
      throw std::runtime_error("rank " + std::to_string(rank) + ": allgather element " + std::to_string(j) + " is " +
                               std::to_string(out[j]));
}

}  // namespace

TEST(HostPlanSelection, RulesPickPlansBySizeAndCountsFallBack) {
  expectAllPassed(runRanks(4, std::chrono::seconds(120), [](int rank, int n, const UniqueId& id) {
    Communicator comm(loopbackBootstrap(rank, n, id),
                      withPlans("plans:\n"
                                "  - {collective: allreduce, file: allreduce_ring/4ranks.json, min_bytes: 1K, max_bytes: 64K}\n"
                                "  - {collective: allreduce, file: allreduce_ring/2ranks.json}\n"
                                "  - {collective: allgather, file: allgather_ring/4ranks.json, max_bytes: 1M}\n"));
    HostCollectives hc(comm);
    uint64_t served = 0;
    auto expectServed = [&](bool yes, const char* what) {
      served += yes ? 1 : 0;
      if (hc.callsServedByPlans() != served)
        throw std::runtime_error(std::string(what) + ": plans served " + std::to_string(hc.callsServedByPlans()) +
                                 " calls, want " + std::to_string(served));
    };
    checkAllReduce(hc, rank, n, 1000, false);  // 4000 B: the ring plan
    expectServed(true, "allreduce 4000 B");
    checkAllReduce(hc, rank, n, 1000, true);  // in place, same plan
    expectServed(true, "allreduce 4000 B in place");
    checkAllReduce(hc, rank, n, 8000, false);  // 32000 B: the executor grows
    expectServed(true, "allreduce 32000 B");
    checkAllReduce(hc, rank, n, 1001, false);  // does not cut into 4 chunks: built-in
    expectServed(false, "allreduce of 1001 elements");
    checkAllReduce(hc, rank, n, 100, false);  // 400 B: below min_bytes, built-in
    expectServed(false, "allreduce 400 B");
    checkAllReduce(hc, rank, n, 40000, false);  // above max_bytes; the 2-rank rule is not for 4 ranks
    expectServed(false, "allreduce 160000 B");
    checkAllGather(hc, rank, n, 1000);
    expectServed(true, "allgather");
  }));
}

TEST(HostPlanSelection, APlanForAnotherCollectiveFailsSetUpNamingTheRule) {
  expectAllPassed(runRanks(2, std::chrono::seconds(60), [](int rank, int n, const UniqueId& id) {
    Communicator comm(loopbackBootstrap(rank, n, id),
                      withPlans("plans:\n  - {collective: allreduce, file: allgather_ring/2ranks.json}\n"));
    requireError([&] { HostCollectives hc(comm); }, ErrorCode::Config,
                 {"test.yaml:2", "allgather_ring/2ranks.json", "a plan for allgather"});
  }));
}

// A plan with switch channels runs on GPU buffers only: a rule that also
// serves host buffers (mem any, the default) fails set-up naming it.
TEST(HostPlanSelection, ASwitchPlanOnARuleForHostBuffersFailsSetUpNamingTheRule) {
  expectAllPassed(runRanks(2, std::chrono::seconds(60), [](int rank, int n, const UniqueId& id) {
    Communicator comm(loopbackBootstrap(rank, n, id),
                      withPlans("plans:\n  - {collective: allreduce, file: allreduce_switch/2ranks.json}\n"));
    requireError([&] { HostCollectives hc(comm); }, ErrorCode::Config,
                 {"test.yaml:2", "allreduce_switch/2ranks.json", "switch channels", "give it mem: gpu"});
  }));
}

// With failover on, the built-in algorithms serve every call (they resend
// what a failed pair lost; a plan's channels do not), with a warning.
TEST(HostPlanSelection, FailoverSetsThePlansAside) {
  expectAllPassed(runRanks(2, std::chrono::seconds(60), [](int rank, int n, const UniqueId& id) {
    Communicator comm(loopbackBootstrap(rank, n, id),
                      withPlans("failover: true\n"
                                "plans:\n  - {collective: allreduce, file: allreduce_ring/2ranks.json}\n"));
    HostCollectives hc(comm);
    checkAllReduce(hc, rank, n, 1000, false);
    if (hc.callsServedByPlans() != 0)
      throw std::runtime_error("a plan served a call with failover on: " + std::to_string(hc.callsServedByPlans()));
  }));
}
