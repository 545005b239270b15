#include "nccl_backend.hpp"

#include <cstring>
#include <vector>

#include "plugboard/error.hpp"

namespace plugboard::perf {

int ncclTypeOf(DataType t) {
  switch (t) {
    case DataType::Int8: return nccl::Int8;
    case DataType::Uint8: return nccl::Uint8;
    case DataType::Int32: return nccl::Int32;
    case DataType::Uint32: return nccl::Uint32;
    case DataType::Int64: return nccl::Int64;
    case DataType::Uint64: return nccl::Uint64;
    case DataType::Float16: return nccl::Float16;
    case DataType::BFloat16: return nccl::BFloat16;
    case DataType::Float32: return nccl::Float32;
    case DataType::Float64: return nccl::Float64;
    case DataType::Float8E4M3: return nccl::Float8E4M3;  // NCCL 2.24 and later
    case DataType::Float8E5M2: return nccl::Float8E5M2;
  }
  throw Error(ErrorCode::InvalidUsage, "no NCCL type for this data type");
}

int ncclOpOf(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return nccl::Sum;
    case ReduceOp::Prod: return nccl::Prod;
    case ReduceOp::Min: return nccl::Min;
    case ReduceOp::Max: return nccl::Max;
    case ReduceOp::Avg: return nccl::Avg;
  }
  throw Error(ErrorCode::InvalidUsage, "no NCCL op for this reduce op");
}

NcclBackend::NcclBackend(std::shared_ptr<NcclLibrary> lib, Bootstrap& boot) : lib_(std::move(lib)) {
  const NcclApi& a = lib_->api();
  std::vector<nccl::UniqueId> ids(static_cast<size_t>(boot.size()));
  if (boot.rank() == 0) lib_->check(a.getUniqueId(&ids[0]), "ncclGetUniqueId");
  else std::memset(&ids[boot.rank()], 0, sizeof(nccl::UniqueId));
  boot.allGather(ids.data(), sizeof(nccl::UniqueId));  // everyone takes rank 0's slot
  lib_->check(a.commInitRank(&comm_, boot.size(), ids[0], boot.rank()),
              "ncclCommInitRank (rank " + std::to_string(boot.rank()) + " of " + std::to_string(boot.size()) + ")");
}

NcclBackend::~NcclBackend() {
  if (comm_) lib_->api().commDestroy(comm_);
}

void NcclBackend::run(const Call& c, const CallPointers& p, cudaStream_t s) {
  const NcclApi& a = lib_->api();
  size_t k = c.shape.callCount;
  int t = ncclTypeOf(c.type), op = ncclOpOf(c.op);
  switch (c.collective) {
    case Collective::AllReduce: lib_->check(a.allReduce(p.send, p.result, k, t, op, comm_, s), "ncclAllReduce"); return;
    case Collective::AllGather: lib_->check(a.allGather(p.send, p.result, k, t, comm_, s), "ncclAllGather"); return;
    case Collective::ReduceScatter:
      lib_->check(a.reduceScatter(p.send, p.result, k, t, op, comm_, s), "ncclReduceScatter");
      return;
    case Collective::Broadcast: lib_->check(a.broadcast(p.send, p.result, k, t, c.root, comm_, s), "ncclBroadcast"); return;
    case Collective::Reduce: lib_->check(a.reduce(p.send, p.result, k, t, op, c.root, comm_, s), "ncclReduce"); return;
    case Collective::AllToAll: allToAll(c, p, s); return;
    case Collective::SendRecv: sendRecv(c, p, s); return;
  }
}

void NcclBackend::allToAll(const Call& c, const CallPointers& p, cudaStream_t s) {
  const NcclApi& a = lib_->api();
  size_t k = c.shape.callCount, block = k * dataTypeSize(c.type);
  int t = ncclTypeOf(c.type);
  lib_->check(a.groupStart(), "ncclGroupStart");
  for (int peer = 0; peer < c.nranks; ++peer) {
    lib_->check(a.send(p.send + peer * block, k, t, peer, comm_, s), "ncclSend");
    lib_->check(a.recv(p.result + peer * block, k, t, peer, comm_, s), "ncclRecv");
  }
  lib_->check(a.groupEnd(), "ncclGroupEnd (alltoall)");
}

void NcclBackend::sendRecv(const Call& c, const CallPointers& p, cudaStream_t s) {
  const NcclApi& a = lib_->api();
  size_t k = c.shape.callCount;
  int t = ncclTypeOf(c.type);
  lib_->check(a.groupStart(), "ncclGroupStart");
  lib_->check(a.send(p.send, k, t, (c.rank + 1) % c.nranks, comm_, s), "ncclSend");
  lib_->check(a.recv(p.result, k, t, (c.rank + c.nranks - 1) % c.nranks, comm_, s), "ncclRecv");
  lib_->check(a.groupEnd(), "ncclGroupEnd (sendrecv)");
}

}  // namespace plugboard::perf
