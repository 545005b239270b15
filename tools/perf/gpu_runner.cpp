#include "gpu_runner.hpp"

#include <algorithm>
#include <chrono>

#include "collective_reference.hpp"
#include "plugboard/error.hpp"
#include "plugboard/gpu/stream_wait.hpp"

namespace plugboard::perf {
namespace {

/// Buffer sizes of one row, as the host sweep lays them out.
size_t sendBytesOf(const Shape& s, size_t es) { return std::max(s.sendElements, s.recvElements) * es; }
size_t recvBytesOf(const Shape& s, size_t es) { return s.recvElements * es; }

/// CUDA events and (with -G) a graph, on one stream.
class Timer {
 public:
  Timer() {
    checkCuda(cudaEventCreate(&start_), "cudaEventCreate");
    checkCuda(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  ~Timer() {
    cudaEventDestroy(stop_);
    cudaEventDestroy(start_);
  }
  void start(cudaStream_t s) { checkCuda(cudaEventRecord(start_, s), "cudaEventRecord"); }
  /// Milliseconds since start(); waits for the stop event (at most waitSeconds).
  float stop(cudaStream_t s, double waitSeconds, const std::string& what) {
    checkCuda(cudaEventRecord(stop_, s), "cudaEventRecord");
    waitForEvent(stop_, waitSeconds, what);
    float ms = 0;
    checkCuda(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return ms;
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

/// One backend on one placement of one row.
struct Run {
  GpuBackend& backend;
  const Call& call;      // host buffers: inputs are filled and results checked there
  CallPointers device;   // the same placement on the device buffers
  cudaStream_t stream;
  Bootstrap& boot;
  double waitSeconds;    // bound of every host wait for the stream

  /// "rank 1: nccl the timed calls", for errors.
  std::string describe(const char* what) const {
    return "rank " + std::to_string(boot.rank()) + ": " + backend.name() + " " + what;
  }
};

void runMany(Run& r, int n) {
  for (int i = 0; i < n; ++i) r.backend.run(r.call, r.device, r.stream);
}

void syncAndCheck(Run& r, const char* what) {
  waitForStream(r.stream, r.waitSeconds, r.describe(what));
  r.backend.checkErrors();
}

/// Every rank past its calls so far, through the backend's own collective
/// (syncRanks) before a bootstrap exchange or the timed calls: a rank whose
/// last call left a failed link moves it (failover) in its next call, which
/// the peer waiting to resume needs; in a bootstrap barrier or gather it
/// would wait on that peer while the peer waits on it. Where the backend
/// has no such call: a bootstrap barrier when `orBarrier`, else nothing.
void settle(Run& r, const char* what, bool orBarrier) {
  if (r.backend.syncRanks(r.stream)) syncAndCheck(r, what);
  else if (orBarrier) r.boot.barrier();
}

/// Copy of bytes ordered on the run's stream (none for an empty row, whose
/// host vector has no storage). A plain cudaMemcpy from pageable memory may
/// return before its DMA lands and runs on the legacy stream, which the
/// non-blocking collective stream does not wait for: the collective could
/// then read stale inputs or have its results overwritten by the upload.
void copy(Run& r, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return;
  checkCuda(cudaMemcpyAsync(dst, src, bytes, kind, r.stream),
            kind == cudaMemcpyHostToDevice ? "cudaMemcpyAsync (inputs to the device)" : "cudaMemcpyAsync (results to the host)");
}

/// Fills the inputs on the host (the receive buffer with a value no result
/// can take), copies them up, runs once, copies the buffers back and
/// counts wrong elements on this rank. Every copy and the call are ordered
/// on one stream.
size_t wrongOnThisRank(Run& r, const DeviceBuffers& dev) {
  const Call& c = r.call;
  size_t es = dataTypeSize(c.type);
  std::fill(c.recv->begin(), c.recv->end(), static_cast<char>(test::kPoisonByte));
  fillInputs(c);
  size_t sb = sendBytesOf(c.shape, es), rb = recvBytesOf(c.shape, es);
  copy(r, dev.send(), c.send->data(), sb, cudaMemcpyHostToDevice);
  copy(r, dev.recv(), c.recv->data(), rb, cudaMemcpyHostToDevice);
  r.backend.run(c, r.device, r.stream);
  copy(r, c.send->data(), dev.send(), sb, cudaMemcpyDeviceToHost);
  copy(r, c.recv->data(), dev.recv(), rb, cudaMemcpyDeviceToHost);
  syncAndCheck(r, "the checked call");
  return countWrong(c);
}

/// Host microseconds since `start` per call of `calls`.
double hostUsPerCall(std::chrono::steady_clock::time_point start, double calls) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / calls;
}

/// Captures iters calls in a graph; launches it once untimed, then `launches` times timed.
/// Returns milliseconds per call; *hostUs: host time per call of the launches.
double timeGraph(Run& r, Timer& timer, int iters, int launches, double* hostUs) {
  cudaGraph_t graph = nullptr;
  // Thread-local capture: Plugboard's proxy thread and NCCL's threads may use CUDA meanwhile.
  checkCuda(cudaStreamBeginCapture(r.stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  runMany(r, iters);
  checkCuda(cudaStreamEndCapture(r.stream, &graph), "cudaStreamEndCapture (" + r.backend.name() + ")");
  cudaGraphExec_t exec = nullptr;
  cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  checkCuda(err, "cudaGraphInstantiate");
  struct Destroy {
    cudaGraphExec_t e;
    ~Destroy() { cudaGraphExecDestroy(e); }
  } destroy{exec};
  checkCuda(cudaGraphLaunch(exec, r.stream), "cudaGraphLaunch (warm-up)");
  syncAndCheck(r, "the warm-up graph launch");
  settle(r, "the sync before the timed graph launches", true);
  timer.start(r.stream);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < launches; ++i) checkCuda(cudaGraphLaunch(exec, r.stream), "cudaGraphLaunch");
  *hostUs = hostUsPerCall(start, static_cast<double>(iters) * launches);
  return timer.stop(r.stream, r.waitSeconds, r.describe("the timed graph launches")) / (static_cast<double>(iters) * launches);
}

/// Milliseconds per call, timed on the stream; *hostUs: host time per call.
double timeCalls(Run& r, Timer& timer, const Options& opts, double* hostUs) {
  runMany(r, opts.warmup);
  syncAndCheck(r, "warm-up");
  settle(r, "the sync before the timed calls", true);
  if (opts.graphLaunches > 0) return timeGraph(r, timer, opts.iters, opts.graphLaunches, hostUs);
  timer.start(r.stream);
  const auto start = std::chrono::steady_clock::now();
  runMany(r, opts.iters);
  *hostUs = hostUsPerCall(start, opts.iters);
  return timer.stop(r.stream, r.waitSeconds, r.describe("the timed calls")) / opts.iters;
}

Measure measure(Run& r, const DeviceBuffers& dev, Timer& timer, const Options& opts) {
  Measure m;
  if (opts.check) {
    const double wrong = static_cast<double>(wrongOnThisRank(r, dev));
    settle(r, "the sync after the checked call", false);
    for (double w : gatherDoubles(r.boot, wrong)) m.wrong += static_cast<size_t>(w);
  }
  double hostUs = 0;
  double us = timeCalls(r, timer, opts, &hostUs) * 1e3;
  syncAndCheck(r, "the timed calls");
  settle(r, "the sync after the timed calls", false);
  for (double t : gatherDoubles(r.boot, us)) m.timeUs += t / r.boot.size();
  for (double t : gatherDoubles(r.boot, hostUs)) m.hostUs += t / r.boot.size();
  return m;
}

/// Device buffer sizes that fit every row of the sweep.
std::pair<size_t, size_t> largestBuffers(const Options& opts, Collective c, int nranks) {
  size_t es = dataTypeSize(opts.type), send = 1, recv = 1;
  for (size_t bytes : sweepSizes(opts)) {
    Shape s = shapeFor(c, bytes, es, nranks);
    send = std::max(send, sendBytesOf(s, es));
    recv = std::max(recv, recvBytesOf(s, es));
  }
  return {send, recv};
}

}  // namespace

CudaBuffers::CudaBuffers(size_t sendBytes, size_t recvBytes) {
  checkCuda(cudaMalloc(&send_, sendBytes), "cudaMalloc of the " + std::to_string(sendBytes) + "-byte send buffer");
  cudaError_t err = cudaMalloc(&recv_, recvBytes);
  if (err != cudaSuccess) cudaFree(send_);
  checkCuda(err, "cudaMalloc of the " + std::to_string(recvBytes) + "-byte receive buffer");
}

CudaBuffers::~CudaBuffers() {
  cudaFree(recv_);
  cudaFree(send_);
}

std::vector<Row> runGpuSweep(GpuBackend& ours, GpuBackend* nccl, Bootstrap& boot, const Options& opts, Collective c,
                             double waitSeconds) {
  int rank = boot.rank(), n = boot.size();
  size_t es = dataTypeSize(opts.type);
  auto [sendMax, recvMax] = largestBuffers(opts, c, n);
  CudaBuffers dev(sendMax, recvMax);
  std::unique_ptr<DeviceBuffers> ncclOwn = nccl ? nccl->ownBuffers(sendMax, recvMax) : nullptr;
  const DeviceBuffers& ncclDev = ncclOwn ? *ncclOwn : dev;
  cudaStream_t stream = nullptr;
  checkCuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  struct Destroy {
    cudaStream_t s;
    ~Destroy() { cudaStreamDestroy(s); }
  } destroy{stream};
  Timer timer;
  std::vector<Row> rows;
  std::vector<char> send, recv;
  for (size_t bytes : sweepSizes(opts)) {
    Row row;
    row.shape = shapeFor(c, bytes, es, n);
    ours.fitShape(c, row.shape);
    row.bytes = row.shape.totalElements * es;
    row.compared = nccl != nullptr;
    send.assign(sendBytesOf(row.shape, es), 0);
    recv.assign(recvBytesOf(row.shape, es), 0);
    for (bool inPlace : {false, true}) {
      // In-place sendrecv: NCCL's grouped send and recv on one buffer race
      // (GpuCollectives::sendRecv allows it), so the row is not run.
      if (inPlace && c == Collective::SendRecv) {
        row.inPlace.skipped = row.ncclInPlace.skipped = true;
        continue;
      }
      Call call{c, opts.type, opts.op, opts.root, rank, n, row.shape, inPlace, &send, &recv};
      call.preMul = opts.preMul;
      CallPointers onDevice = callPointers(call, dev.send(), dev.recv());
      Run mine{ours, call, onDevice, stream, boot, waitSeconds};
      Measure m = measure(mine, dev, timer, opts);
      setBandwidth(m, row.bytes, c, n);
      (inPlace ? row.inPlace : row.outOfPlace) = m;
      if (!nccl) continue;
      Run theirs{*nccl, call, callPointers(call, ncclDev.send(), ncclDev.recv()), stream, boot, waitSeconds};
      Measure t = measure(theirs, ncclDev, timer, opts);
      setBandwidth(t, row.bytes, c, n);
      (inPlace ? row.ncclInPlace : row.ncclOutOfPlace) = t;
    }
    rows.push_back(row);
  }
  return rows;
}

}  // namespace plugboard::perf
