#include "collective_ops.hpp"

#include "collective_reference.hpp"
#include "plugboard/error.hpp"

namespace plugboard::perf {
namespace {

using plugboard::test::expectedValue;
using plugboard::test::inputValue;
using plugboard::test::loadValue;
using plugboard::test::sameValue;
using plugboard::test::storeValue;

const std::vector<std::pair<const char*, Collective>>& names() {
  static const std::vector<std::pair<const char*, Collective>> n = {
      {"allreduce", Collective::AllReduce}, {"allgather", Collective::AllGather},
      {"reducescatter", Collective::ReduceScatter}, {"broadcast", Collective::Broadcast},
      {"reduce", Collective::Reduce}, {"alltoall", Collective::AllToAll}, {"sendrecv", Collective::SendRecv}};
  return n;
}

size_t es(const Call& c) { return dataTypeSize(c.type); }

/// Where the result lands in the host buffers, in place or not.
char* resultPtr(const Call& c) { return callPointers(c, c.send->data(), c.recv->data()).result; }

/// The value rank `from` contributes at element i (non-reducing collectives).
double plainValue(int from, size_t i, DataType t) {
  std::vector<char> tmp(8);
  storeValue(tmp.data(), 0, t, inputValue(from, i, t, ReduceOp::Sum));
  return loadValue(tmp.data(), 0, t);
}

double expectedAt(const Call& c, size_t i) {
  size_t k = c.shape.callCount;
  switch (c.collective) {
    case Collective::AllReduce: case Collective::Reduce: return expectedValue(i, c.nranks, c.type, c.op);
    case Collective::ReduceScatter: return expectedValue(c.rank * k + i, c.nranks, c.type, c.op);
    case Collective::AllGather: return plainValue(static_cast<int>(i / k), i % k, c.type);
    case Collective::Broadcast: return plainValue(c.root, i, c.type);
    case Collective::AllToAll: return plainValue(static_cast<int>(i / k) * 1000 + c.rank, i % k, c.type);
    case Collective::SendRecv: return plainValue((c.rank + c.nranks - 1) % c.nranks, i, c.type);
  }
  return 0;
}

}  // namespace

CallPointers callPointers(const Call& c, char* sendBase, char* recvBase) {
  size_t rankOffset = static_cast<size_t>(c.rank) * c.shape.callCount * es(c);
  if (!c.inPlace) return {sendBase, recvBase};
  switch (c.collective) {
    case Collective::AllGather: return {recvBase + rankOffset, recvBase};
    case Collective::ReduceScatter: return {sendBase, sendBase + rankOffset};
    default: return {sendBase, sendBase};
  }
}

Collective parseCollective(const std::string& name) {
  for (auto& [n, c] : names())
    if (name == n) return c;
  throw Error(ErrorCode::InvalidUsage, "unknown collective '" + name +
                                           "' (allreduce, allgather, reducescatter, broadcast, reduce, alltoall, sendrecv)");
}

const char* collectiveName(Collective c) {
  for (auto& [n, v] : names())
    if (v == c) return n;
  return "?";
}

bool collectiveReduces(Collective c) {
  return c == Collective::AllReduce || c == Collective::ReduceScatter || c == Collective::Reduce;
}
bool collectiveRooted(Collective c) { return c == Collective::Broadcast || c == Collective::Reduce; }

void checkRoot(int root, Collective c, int nranks) {
  if (collectiveRooted(c) && root >= nranks)
    throw Error(ErrorCode::InvalidUsage, "-r " + std::to_string(root) + " is not a rank of 0.." + std::to_string(nranks - 1));
}

Shape shapeFor(Collective c, size_t bytes, size_t elementSize, int nranks) {
  size_t n = static_cast<size_t>(nranks), total = bytes / elementSize;
  Shape s;
  switch (c) {
    case Collective::AllGather: case Collective::ReduceScatter: case Collective::AllToAll:
      s.callCount = total / n;
      s.totalElements = s.callCount * n;
      s.sendElements = c == Collective::AllGather ? s.callCount : s.totalElements;
      s.recvElements = c == Collective::ReduceScatter ? s.callCount : s.totalElements;
      return s;
    default:
      s.callCount = s.totalElements = s.sendElements = s.recvElements = total;
      return s;
  }
}

double busBandwidthFactor(Collective c, int nranks) {
  double n = nranks;
  switch (c) {
    case Collective::AllReduce: return 2.0 * (n - 1) / n;
    case Collective::AllGather: case Collective::ReduceScatter: case Collective::AllToAll: return (n - 1) / n;
    default: return 1.0;
  }
}

void runOnce(HostCollectives& hc, const Call& c) {
  size_t k = c.shape.callCount;
  CallPointers p = callPointers(c, c.send->data(), c.recv->data());
  char* send = p.send;
  char* out = p.result;
  if (c.plan) return c.plan->run(send, out, c.shape.sendElements, c.type, c.op);
  switch (c.collective) {
    case Collective::AllReduce: hc.allReduce(send, out, k, c.type, c.op); return;
    case Collective::AllGather: hc.allGather(send, out, k, c.type); return;
    case Collective::ReduceScatter: hc.reduceScatter(send, out, k, c.type, c.op); return;
    case Collective::Broadcast: hc.broadcast(send, out, k, c.type, c.root); return;
    case Collective::Reduce: hc.reduce(send, out, k, c.type, c.op, c.root); return;
    case Collective::AllToAll: hc.allToAll(send, out, k, c.type); return;
    case Collective::SendRecv:
      hc.sendRecv(send, k, (c.rank + 1) % c.nranks, out, k, (c.rank + c.nranks - 1) % c.nranks, c.type);
      return;
  }
}

void fillInputs(const Call& c) {
  size_t k = c.shape.callCount;
  char* send = callPointers(c, c.send->data(), c.recv->data()).send;
  ReduceOp op = collectiveReduces(c.collective) ? c.op : ReduceOp::Sum;
  for (size_t i = 0; i < c.shape.sendElements; ++i) {
    int from = c.collective == Collective::AllToAll ? c.rank * 1000 + static_cast<int>(i / k) : c.rank;
    size_t at = c.collective == Collective::AllToAll ? i % k : i;
    storeValue(send, i, c.type, inputValue(from, at, c.type, op));
  }
}

size_t countWrong(const Call& c) {
  if (c.collective == Collective::Reduce && c.rank != c.root) return 0;
  const char* out = resultPtr(c);
  size_t wrong = 0;
  for (size_t i = 0; i < c.shape.recvElements; ++i)
    if (!sameValue(loadValue(out, i, c.type), expectedAt(c, i), c.type, c.op)) ++wrong;
  return wrong;
}

}  // namespace plugboard::perf
