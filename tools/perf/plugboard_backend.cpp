// GpuBackend over plugboard::GpuCollectives.
#include <cstdint>
#include <cstring>

#include "gpu_backend.hpp"
#include "plugboard/error.hpp"
#include "plugboard/gpu/collectives.hpp"

namespace plugboard::perf {

void checkCuda(cudaError_t err, const std::string& what) {
  if (err != cudaSuccess) throw Error(ErrorCode::System, "CUDA " + what + ": " + cudaGetErrorString(err));
}

std::array<uint8_t, 8> preMulOne(DataType type) {
  std::array<uint8_t, 8> s{};
  auto put = [&](auto v) { std::memcpy(s.data(), &v, sizeof(v)); };
  switch (type) {
    case DataType::Int8: case DataType::Uint8: put(uint8_t{1}); break;
    case DataType::Int32: case DataType::Uint32: put(uint32_t{1}); break;
    case DataType::Int64: case DataType::Uint64: put(uint64_t{1}); break;
    case DataType::Float16: put(uint16_t{0x3C00}); break;
    case DataType::BFloat16: put(uint16_t{0x3F80}); break;
    case DataType::Float32: put(1.0f); break;
    case DataType::Float64: put(1.0); break;
    default: throw Error(ErrorCode::InvalidUsage, std::string("-o premulsum: no PreMulSum of ") + dataTypeName(type));
  }
  return s;
}

namespace {

/// The ring sendrecv (send to rank + 1, receive from rank - 1) is one fused
/// GpuCollectives::sendRecv: one kernel moves both directions at once, as
/// NCCL's grouped send/recv does, and sends before it waits, so the ring
/// cannot deadlock.
class PlugboardBackend : public GpuBackend {
 public:
  explicit PlugboardBackend(Communicator& comm) : gc_(comm) {}
  ~PlugboardBackend() override { cudaFree(word_); }
  std::string name() const override { return "plugboard"; }
  void checkErrors() override { gc_.checkErrors(); }
  /// With failover, a rank whose last call left a failed link moves it in
  /// its next call, which its peer, waiting to resume the failed call,
  /// needs: a bootstrap exchange there would wait on that peer for good.
  bool syncRanks(cudaStream_t s) override {
    if (!word_) {
      checkCuda(cudaMalloc(&word_, sizeof(float)), "cudaMalloc of the sync word");
      checkCuda(cudaMemset(word_, 0, sizeof(float)), "cudaMemset of the sync word");
    }
    gc_.allReduce(word_, word_, 1, DataType::Float32, ReduceOp::Sum, s);
    return true;
  }

  void run(const Call& c, const CallPointers& p, cudaStream_t s) override {
    size_t k = c.shape.callCount;
    if (c.preMul && runPreMul(c, p, s)) return;
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
  /// A reducing collective as a PreMulSum of scalar 1; false for the others.
  bool runPreMul(const Call& c, const CallPointers& p, cudaStream_t s) {
    PreMulScalar one;
    one.hostValue = preMulOne(c.type);
    const size_t k = c.shape.callCount;
    switch (c.collective) {
      case Collective::AllReduce: gc_.allReduce(p.send, p.result, k, c.type, one, s); return true;
      case Collective::ReduceScatter: gc_.reduceScatter(p.send, p.result, k, c.type, one, s); return true;
      case Collective::Reduce: gc_.reduce(p.send, p.result, k, c.type, one, c.root, s); return true;
      default: return false;
    }
  }

  void sendRecv(const Call& c, const CallPointers& p, cudaStream_t s) {
    size_t k = c.shape.callCount;
    int to = (c.rank + 1) % c.nranks, from = (c.rank + c.nranks - 1) % c.nranks;
    gc_.sendRecv(p.send, k, to, p.result, k, from, c.type, s);
  }

  GpuCollectives gc_;
  float* word_ = nullptr;  // syncRanks()'s element
};

}  // namespace

std::unique_ptr<GpuBackend> makePlugboardBackend(Communicator& comm) { return std::make_unique<PlugboardBackend>(comm); }

}  // namespace plugboard::perf
