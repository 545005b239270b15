// The GPU -> CPU Fifo: order, many producers under full-queue pressure,
// sync, and bounded waits that end in a reported error instead of a hang.
#include <atomic>
#include <stdexcept>
#include <chrono>
#include <thread>
#include <vector>

#include "gpu_test_util.hpp"
#include "plugboard/error.hpp"
#include "plugboard/gpu/fifo.hpp"

using namespace plugboard;

namespace {

// Each thread pushes perThread triggers {thread, i}; failures are counted.
__global__ void pushKernel(FifoDeviceHandle fifo, int perThread, unsigned* failures, int64_t timeoutNs) {
  const uint64_t thread = blockIdx.x * blockDim.x + threadIdx.x;
  for (int i = 0; i < perThread; ++i) {
    if (fifo.push(ProxyTrigger{thread, static_cast<uint64_t>(i) + 1}, timeoutNs) == kFifoPushFailed)
      atomicAdd(failures, 1u);
  }
}

// One thread: push, then wait until the host popped it, n times.
__global__ void pushSyncKernel(FifoDeviceHandle fifo, int n, unsigned* failures) {
  for (int i = 0; i < n; ++i) {
    uint64_t pos = fifo.push(ProxyTrigger{static_cast<uint64_t>(i), 1});
    if (pos == kFifoPushFailed || !fifo.sync(pos)) atomicAdd(failures, 1u);
  }
}

/// A device counter of failed pushes (plain device memory, no managed memory).
struct FailureCounter {
  unsigned* dev = nullptr;
  FailureCounter() {
    if (cudaMalloc(&dev, sizeof(unsigned)) != cudaSuccess || cudaMemset(dev, 0, sizeof(unsigned)) != cudaSuccess)
      throw std::runtime_error("cudaMalloc of the failure counter failed");
  }
  ~FailureCounter() { cudaFree(dev); }
  unsigned read() const {
    unsigned v = ~0u;
    cudaMemcpy(&v, dev, sizeof(v), cudaMemcpyDeviceToHost);
    return v;
  }
};

/// Pops `expected` triggers (or gives up after the timeout) into out.
void drain(Fifo& fifo, size_t expected, std::vector<ProxyTrigger>& out, std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (out.size() < expected && std::chrono::steady_clock::now() < deadline) {
    bool ready = false;
    ProxyTrigger t = fifo.poll(&ready);
    if (!ready) continue;
    out.push_back(t);
    fifo.pop();
  }
}

}  // namespace

TEST(GpuFifo, SingleProducerKeepsOrder) {
  PB_REQUIRE_GPU();
  Fifo fifo(16);
  FailureCounter failures;
  constexpr int kCount = 1000;  // many times the queue: exercises back-pressure
  pushKernel<<<1, 1>>>(fifo.deviceHandle(), kCount, failures.dev, kDefaultWaitTimeoutNs);
  std::vector<ProxyTrigger> got;
  drain(fifo, kCount, got, std::chrono::seconds(30));
  PB_EXPECT_CUDA(cudaDeviceSynchronize());
  ASSERT_EQ(got.size(), size_t(kCount));
  for (int i = 0; i < kCount; ++i) {
    EXPECT_EQ(got[i].fst, 0u);
    ASSERT_EQ(got[i].snd, uint64_t(i) + 1) << "trigger " << i << " out of order";
  }
  EXPECT_EQ(failures.read(), 0u);
  EXPECT_EQ(fifo.deviceError(), 0u);
}

TEST(GpuFifo, ManyProducersUnderFullQueuePressureLoseNothing) {
  PB_REQUIRE_GPU();
  Fifo fifo(64);
  FailureCounter failures;
  constexpr int kBlocks = 8, kThreads = 128, kPer = 64;
  pushKernel<<<kBlocks, kThreads>>>(fifo.deviceHandle(), kPer, failures.dev, kDefaultWaitTimeoutNs);
  std::vector<ProxyTrigger> got;
  drain(fifo, size_t(kBlocks) * kThreads * kPer, got, std::chrono::seconds(60));
  PB_EXPECT_CUDA(cudaDeviceSynchronize());
  ASSERT_EQ(got.size(), size_t(kBlocks) * kThreads * kPer);
  std::vector<std::vector<bool>> seen(kBlocks * kThreads, std::vector<bool>(kPer, false));
  std::vector<uint64_t> last(kBlocks * kThreads, 0);
  for (const auto& t : got) {
    ASSERT_LT(t.fst, uint64_t(kBlocks * kThreads));
    ASSERT_GE(t.snd, 1u);
    ASSERT_LE(t.snd, uint64_t(kPer));
    ASSERT_FALSE(seen[t.fst][t.snd - 1]) << "duplicate trigger " << t.fst << "/" << t.snd;
    seen[t.fst][t.snd - 1] = true;
    EXPECT_GT(t.snd, last[t.fst]) << "one thread's triggers out of order";
    last[t.fst] = t.snd;
  }
  EXPECT_EQ(failures.read(), 0u);
}

TEST(GpuFifo, SyncReturnsOncePopped) {
  PB_REQUIRE_GPU();
  Fifo fifo(8);
  FailureCounter failures;
  constexpr int kCount = 200;
  pushSyncKernel<<<1, 1>>>(fifo.deviceHandle(), kCount, failures.dev);
  std::vector<ProxyTrigger> got;
  drain(fifo, kCount, got, std::chrono::seconds(30));
  PB_EXPECT_CUDA(cudaDeviceSynchronize());
  EXPECT_EQ(got.size(), size_t(kCount));
  EXPECT_EQ(failures.read(), 0u);
}

TEST(GpuFifo, FullQueueWithoutConsumerEndsInReportedError) {
  PB_REQUIRE_GPU();
  Fifo fifo(4);
  FailureCounter failures;
  // Nobody pops: 4 pushes fit, the other 4 must give up after their 0.1 s bound.
  pushKernel<<<1, 1>>>(fifo.deviceHandle(), 8, failures.dev, 100000000);  // 0.1 s
  PB_EXPECT_CUDA(cudaDeviceSynchronize());
  EXPECT_EQ(failures.read(), 4u);
  EXPECT_EQ(fifo.deviceError(), uint32_t(kFifoFullTimeout));
}

TEST(GpuFifo, AbortReleasesWaitingProducers) {
  PB_REQUIRE_GPU();
  Fifo fifo(4);
  FailureCounter failures;
  pushKernel<<<1, 1>>>(fifo.deviceHandle(), 6, failures.dev, kDefaultWaitTimeoutNs);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  fifo.abort();
  PB_EXPECT_CUDA(cudaDeviceSynchronize());
  EXPECT_EQ(failures.read(), 2u);
  EXPECT_EQ(fifo.deviceError(), uint32_t(kFifoAborted));
}

TEST(GpuFifo, RejectsTinySize) {
  PB_REQUIRE_GPU();
  EXPECT_THROW(Fifo(1), plugboard::Error);
}
