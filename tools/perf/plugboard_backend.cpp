// GpuBackend over plugboard::GpuCollectives.
#include "gpu_backend.hpp"
#include "plugboard/error.hpp"
#include "plugboard/gpu/collectives.hpp"

namespace plugboard::perf {

void checkCuda(cudaError_t err, const std::string& what) {
  if (err != cudaSuccess) throw Error(ErrorCode::System, "CUDA " + what + ": " + cudaGetErrorString(err));
}

namespace {

/// The ring sendrecv (send to rank + 1, receive from rank - 1) is one fused
/// GpuCollectives::sendRecv: one kernel moves both directions at once, as
/// NCCL's grouped send/recv does, and sends before it waits, so the ring
/// cannot deadlock.
class PlugboardBackend : public GpuBackend {
 public:
  explicit PlugboardBackend(Communicator& comm) : gc_(comm) {}
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
    int to = (c.rank + 1) % c.nranks, from = (c.rank + c.nranks - 1) % c.nranks;
    gc_.sendRecv(p.send, k, to, p.result, k, from, c.type, s);
  }

  GpuCollectives gc_;
};

}  // namespace

std::unique_ptr<GpuBackend> makePlugboardBackend(Communicator& comm) { return std::make_unique<PlugboardBackend>(comm); }

}  // namespace plugboard::perf
