// Fifo push -> proxy pop latency on one GPU, measured two ways.
//
// Stream (issue 13's one-way figure): one GPU thread pushes n triggers back
// to back, never waiting for the host but when the queue is full; the host
// thread pops as they come. The steady-state interval between two pops on
// the host is the one-way cost of a trigger once the pipe is full (the
// first 1000 pops are warm-up). The device's own time per push is printed
// beside it.
//
// Round trip: one GPU thread pushes trigger i and waits for the host's
// acknowledgement (a mapped host word set to i+1 right after pop); the
// device times the round trips with %globaltimer.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "plugboard/gpu/fifo.hpp"

using namespace plugboard;

namespace {

__global__ void pingKernel(FifoDeviceHandle fifo, volatile uint64_t* ack, int iters, int warmup, uint64_t* elapsedNs) {
  uint64_t start = 0;
  for (int i = 0; i < warmup + iters; ++i) {
    if (i == warmup) start = globalTimerNs();
    if (fifo.push(ProxyTrigger{static_cast<uint64_t>(i), 1}) == kFifoPushFailed) return;
    while (*ack != static_cast<uint64_t>(i) + 1) {
    }
  }
  *elapsedNs = globalTimerNs() - start;
}

__global__ void streamKernel(FifoDeviceHandle fifo, int n, uint64_t* elapsedNs) {
  const uint64_t start = globalTimerNs();
  for (int i = 0; i < n; ++i)
    if (fifo.push(ProxyTrigger{static_cast<uint64_t>(i), 1}) == kFifoPushFailed) return;
  *elapsedNs = globalTimerNs() - start;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

double runOnce(int iters, int warmup) {
  Fifo fifo(512);
  uint64_t* ack;
  uint64_t* ackDev;
  uint64_t* elapsed;
  check(cudaHostAlloc(&ack, sizeof(uint64_t), cudaHostAllocMapped), "cudaHostAlloc");
  *ack = 0;
  check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&ackDev), ack, 0), "cudaHostGetDevicePointer");
  check(cudaMalloc(&elapsed, sizeof(uint64_t)), "cudaMalloc");
  pingKernel<<<1, 1>>>(fifo.deviceHandle(), ackDev, iters, warmup, elapsed);
  for (int done = 0; done < iters + warmup;) {
    bool ready = false;
    ProxyTrigger t = fifo.poll(&ready);
    if (!ready) continue;
    fifo.pop();
    __atomic_store_n(ack, t.fst + 1, __ATOMIC_RELEASE);
    ++done;
  }
  check(cudaDeviceSynchronize(), "kernel");
  uint64_t ns = 0;
  check(cudaMemcpy(&ns, elapsed, sizeof(ns), cudaMemcpyDeviceToHost), "cudaMemcpy");
  cudaFree(elapsed);
  cudaFreeHost(ack);
  if (fifo.deviceError()) std::fprintf(stderr, "device error %u\n", fifo.deviceError());
  return static_cast<double>(ns) / iters / 1000.0;  // us per round trip
}

struct StreamResult {
  double popIntervalUs;  ///< host: steady-state time between two pops
  double pushUs;         ///< device: time per push, the whole stream
};

StreamResult streamOnce(int n, int warmup) {
  Fifo fifo(512);
  uint64_t* elapsed;
  check(cudaMalloc(&elapsed, sizeof(uint64_t)), "cudaMalloc");
  streamKernel<<<1, 1>>>(fifo.deviceHandle(), n + warmup, elapsed);
  std::chrono::steady_clock::time_point first;
  for (int done = 0; done < n + warmup;) {
    bool ready = false;
    ProxyTrigger t = fifo.poll(&ready);
    if (!ready) continue;
    if (t.fst != static_cast<uint64_t>(done)) {
      std::fprintf(stderr, "popped trigger %llu, expected %d\n", static_cast<unsigned long long>(t.fst), done);
      std::exit(1);
    }
    fifo.pop();
    if (++done == warmup) first = std::chrono::steady_clock::now();
  }
  const auto last = std::chrono::steady_clock::now();
  check(cudaDeviceSynchronize(), "kernel");
  uint64_t ns = 0;
  check(cudaMemcpy(&ns, elapsed, sizeof(ns), cudaMemcpyDeviceToHost), "cudaMemcpy");
  cudaFree(elapsed);
  if (fifo.deviceError()) std::fprintf(stderr, "device error %u\n", fifo.deviceError());
  return {std::chrono::duration<double, std::micro>(last - first).count() / n,
          static_cast<double>(ns) / (n + warmup) / 1000.0};
}

}  // namespace

int main(int argc, char** argv) {
  int iters = argc > 1 ? std::atoi(argv[1]) : 20000;
  std::vector<double> runs, pops, pushes;
  for (int r = 0; r < 5; ++r) {
    runs.push_back(runOnce(iters, 1000));
    StreamResult s = streamOnce(iters, 1000);
    pops.push_back(s.popIntervalUs);
    pushes.push_back(s.pushUs);
  }
  std::sort(runs.begin(), runs.end());
  std::sort(pops.begin(), pops.end());
  std::sort(pushes.begin(), pushes.end());
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  std::printf("# fifo_latency on %s, %d round trips x 5 runs\n", prop.name, iters);
  std::printf("fifo_stream_pop_interval_us_median %.3f\nfifo_stream_pop_interval_us_min %.3f\n", pops[2], pops[0]);
  std::printf("fifo_stream_device_push_us_median %.3f\n", pushes[2]);
  std::printf("fifo_roundtrip_us_median %.3f\nfifo_roundtrip_us_min %.3f\n", runs[2], runs[0]);
  return 0;
}
