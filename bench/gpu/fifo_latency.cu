// Fifo push -> proxy pop latency on one GPU.
//
// One GPU thread pushes trigger i and waits for the host's acknowledgement
// (a mapped host word set to i+1 right after pop); the host thread polls,
// pops, acknowledges. The device times kIters round trips with %globaltimer.
// Printed: the round trip, and half of it as the one-way push -> pop
// estimate (the ack's way back crosses PCIe the same way the trigger did).
#include <cuda_runtime.h>

#include <algorithm>
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

}  // namespace

int main(int argc, char** argv) {
  int iters = argc > 1 ? std::atoi(argv[1]) : 20000;
  std::vector<double> runs;
  for (int r = 0; r < 5; ++r) runs.push_back(runOnce(iters, 1000));
  std::sort(runs.begin(), runs.end());
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  std::printf("# fifo_latency on %s, %d round trips x 5 runs\n", prop.name, iters);
  std::printf("fifo_roundtrip_us_median %.3f\nfifo_push_to_pop_us_median %.3f\nfifo_roundtrip_us_min %.3f\n", runs[2],
              runs[2] / 2, runs[0]);
  return 0;
}
