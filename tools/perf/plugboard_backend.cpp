// GpuBackend over plugboard::GpuCollectives.
#include "gpu_backend.hpp"
#include "plugboard/error.hpp"

#ifdef PLUGBOARD_PERF_HAVE_GPU_COLLECTIVES
#include "plugboard/gpu/collectives.hpp"
#endif

namespace plugboard::perf {

void checkCuda(cudaError_t err, const std::string& what) {
  if (err != cudaSuccess) throw Error(ErrorCode::System, "CUDA " + what + ": " + cudaGetErrorString(err));
}

#ifdef PLUGBOARD_PERF_HAVE_GPU_COLLECTIVES
namespace {

/// Send and receive of sendrecv run on two streams forked from the caller's
/// (event fork/join, capturable), so neither can wait behind the other.
class PlugboardBackend : public GpuBackend {
 public:
  explicit PlugboardBackend(Communicator& comm) : gc_(comm) {
    checkCuda(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    checkCuda(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming), "cudaEventCreate");
    checkCuda(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming), "cudaEventCreate");
  }
  ~PlugboardBackend() override {
    cudaEventDestroy(join_);
    cudaEventDestroy(fork_);
    cudaStreamDestroy(side_);
  }
  std::string name() const override { return "plugboard"; }
  void checkErrors() override { gc_.checkErrors(); }

  void run(const Call& c, const CallPointers& p, cudaStream_t s) override {
    size_t k = c.shape.callCount;
    switch (c.collective) {
      case Collective::AllReduce: gc_.allReduce(p.send, p.result, k, c.type, c.op, s); return;
      case Collective::AllGather: gc_.allGather(p.send, p.result, k, c.type, s); return;
      case Collective::ReduceScatter: gc_.reduceScatter(p.send, p.result, k, c.type, c.op, s); return;
      case Collective::Broadcast: gc_.broadcast(p.send, p.result, k, c.type, c.root, s); return;
      case Collective::Reduce: gc_.reduce(p.send, p.result, k, c.type, c.op, c.root, s); return;
      case Collective::AllToAll: gc_.allToAll(p.send, p.result, k, c.type, s); return;
      case Collective::SendRecv: sendRecv(c, p, s); return;
    }
  }

 private:
  void sendRecv(const Call& c, const CallPointers& p, cudaStream_t s) {
    size_t k = c.shape.callCount;
    checkCuda(cudaEventRecord(fork_, s), "cudaEventRecord");
    checkCuda(cudaStreamWaitEvent(side_, fork_, 0), "cudaStreamWaitEvent");
    gc_.recv(p.result, k, c.type, (c.rank + c.nranks - 1) % c.nranks, side_);
    gc_.send(p.send, k, c.type, (c.rank + 1) % c.nranks, s);
    checkCuda(cudaEventRecord(join_, side_), "cudaEventRecord");
    checkCuda(cudaStreamWaitEvent(s, join_, 0), "cudaStreamWaitEvent");
  }

  GpuCollectives gc_;
  cudaStream_t side_ = nullptr;
  cudaEvent_t fork_ = nullptr, join_ = nullptr;
};

}  // namespace

std::unique_ptr<GpuBackend> makePlugboardBackend(Communicator& comm) { return std::make_unique<PlugboardBackend>(comm); }

#else

std::unique_ptr<GpuBackend> makePlugboardBackend(Communicator&) {
  throw Error(ErrorCode::InvalidUsage,
              "--mem gpu: this build's core has no GpuCollectives implementation yet (it comes with branch "
              "gpu-coll); run with --mem host");
}

#endif

}  // namespace plugboard::perf
