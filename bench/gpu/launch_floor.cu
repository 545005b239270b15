// Kernel launch floor on one GPU: the time per kernel of back-to-back
// launches of a kernel that does nothing, timed with CUDA events around
// the loop exactly as plugboard-perf times a collective without graphs.
// It bounds what any small collective (ours or NCCL's) can reach when each
// call is its own launch. Rows: grid x block, graphs or not; columns: GPU
// time per launch (events) and the host's time per launch call (steady
// clock around the enqueue loop: when the two are equal, the host bounds it).
// Then the host cost of the runtime calls a library may add to each call
// (the NCCL API library's stream ordering: cudaGetDevice,
// cudaStreamIsCapturing, cudaEventRecord, cudaStreamWaitEvent), each made n
// times in a row on an idle stream.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace {

/// A kernel argument of the size of the collectives' DeviceCtx + arguments.
struct Params {
  char bytes[256];
};

__global__ void emptyKernel(Params p) {
  if (p.bytes[0] == 1 && threadIdx.x == 1023) p.bytes[1] = 0;  // never true; keeps p alive
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

/// Microseconds per launch of n launches of grid x block on stream s: on
/// the GPU (events) and on the host (the enqueue calls).
struct LaunchTimes {
  float gpuUs, hostUs;
};

LaunchTimes timeLaunches(cudaStream_t s, int n, unsigned grid, unsigned block, bool graph) {
  Params p{};
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  cudaGraphExec_t exec = nullptr;
  if (graph) {
    cudaGraph_t g;
    check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    for (int i = 0; i < n; ++i) emptyKernel<<<grid, block, 0, s>>>(p);
    check(cudaStreamEndCapture(s, &g), "cudaStreamEndCapture");
    check(cudaGraphInstantiate(&exec, g, 0), "cudaGraphInstantiate");
    check(cudaGraphDestroy(g), "cudaGraphDestroy");
    check(cudaGraphLaunch(exec, s), "cudaGraphLaunch");  // warm-up
  } else {
    for (int i = 0; i < 20; ++i) emptyKernel<<<grid, block, 0, s>>>(p);
  }
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  check(cudaEventRecord(start, s), "cudaEventRecord");
  const auto hostStart = std::chrono::steady_clock::now();
  if (graph) check(cudaGraphLaunch(exec, s), "cudaGraphLaunch");
  else
    for (int i = 0; i < n; ++i) emptyKernel<<<grid, block, 0, s>>>(p);
  const auto hostEnd = std::chrono::steady_clock::now();
  check(cudaEventRecord(stop, s), "cudaEventRecord");
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  if (exec) check(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
  check(cudaEventDestroy(start), "cudaEventDestroy");
  check(cudaEventDestroy(stop), "cudaEventDestroy");
  const float hostUs = std::chrono::duration<float, std::micro>(hostEnd - hostStart).count() / n;
  return {ms * 1000.0f / n, hostUs};
}

/// Host microseconds per call of fn, called n times.
template <typename Fn>
float hostUsPerCall(int n, Fn&& fn) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) fn();
  return std::chrono::duration<float, std::micro>(std::chrono::steady_clock::now() - start).count() / n;
}

void printRuntimeCallCosts(cudaStream_t s, int n) {
  cudaEvent_t e;
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  int device = 0;
  cudaStreamCaptureStatus status;
  std::printf("%-34s %s\n", "runtime call (idle stream)", "host_us");
  std::printf("%-34s %.3f\n", "cudaGetDevice",
              hostUsPerCall(n, [&] { check(cudaGetDevice(&device), "cudaGetDevice"); }));
  std::printf("%-34s %.3f\n", "cudaStreamIsCapturing",
              hostUsPerCall(n, [&] { check(cudaStreamIsCapturing(s, &status), "cudaStreamIsCapturing"); }));
  std::printf("%-34s %.3f\n", "cudaEventRecord (timing disabled)",
              hostUsPerCall(n, [&] { check(cudaEventRecord(e, s), "cudaEventRecord"); }));
  std::printf("%-34s %.3f\n", "cudaStreamWaitEvent",
              hostUsPerCall(n, [&] { check(cudaStreamWaitEvent(s, e, 0), "cudaStreamWaitEvent"); }));
  std::printf("%-34s %.3f\n", "cudaGetLastError", hostUsPerCall(n, [] { (void)cudaGetLastError(); }));
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  check(cudaEventDestroy(e), "cudaEventDestroy");
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 1000;
  if (n <= 0) {
    std::fprintf(stderr, "usage: %s [launches > 0]\n", argv[0]);
    return 2;
  }
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  std::printf("%-8s %-6s %-6s %-10s %s\n", "graph", "grid", "block", "launch_us", "host_enqueue_us");
  for (bool graph : {false, true})
    for (unsigned grid : {1u, 8u, 128u}) {
      const LaunchTimes t = timeLaunches(s, n, grid, 512, graph);
      std::printf("%-8s %-6u %-6u %-10.2f %.2f\n", graph ? "yes" : "no", grid, 512u, t.gpuUs, t.hostUs);
    }
  printRuntimeCallCosts(s, n);
  check(cudaStreamDestroy(s), "cudaStreamDestroy");
  return 0;
}
