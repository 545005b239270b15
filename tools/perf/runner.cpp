#include "runner.hpp"

#include <chrono>

namespace plugboard::perf {
namespace {

/// Every rank's value, by rank, through the host collectives themselves
/// rather than the bootstrap: a rank that left a call with a chunk on a link
/// that failed after it was posted moves that link (failover) in its next
/// call, which the peer waiting for the chunk needs; in a bootstrap barrier
/// it would wait on that peer while the peer waits on it.
std::vector<double> gatherDoubles(HostCollectives& hc, double mine) {
  std::vector<double> all(static_cast<size_t>(hc.communicator().size()));
  hc.allGather(&mine, all.data(), 1, DataType::Float64);
  return all;
}

Measure measure(HostCollectives& hc, const Options& opts, Call& call) {
  const int n = hc.communicator().size();
  fillInputs(call);
  for (int i = 0; i < opts.warmup; ++i) runOnce(hc, call);
  gatherDoubles(hc, 0);  // the barrier before the timed calls
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < opts.iters; ++i) runOnce(hc, call);
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / opts.iters;
  Measure m;
  for (double t : gatherDoubles(hc, us)) m.timeUs += t / n;
  if (opts.check) {
    fillInputs(call);
    runOnce(hc, call);
    for (double w : gatherDoubles(hc, static_cast<double>(countWrong(call)))) m.wrong += static_cast<size_t>(w);
  }
  return m;
}

}  // namespace

std::vector<double> gatherDoubles(Bootstrap& b, double mine) {
  std::vector<double> all(static_cast<size_t>(b.size()));
  all[b.rank()] = mine;
  b.allGather(all.data(), sizeof(double));
  return all;
}

void setBandwidth(Measure& m, size_t bytes, Collective c, int nranks) {
  double seconds = m.timeUs * 1e-6;
  m.algBw = seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
  m.busBw = m.algBw * busBandwidthFactor(c, nranks);
}

double ratioToNccl(const Measure& ours, const Measure& nccl) {
  return ours.timeUs > 0 && nccl.timeUs > 0 ? ours.timeUs / nccl.timeUs : 0;
}

std::vector<size_t> sweepSizes(const Options& o) {
  std::vector<size_t> sizes;
  for (size_t b = o.minBytes; b <= o.maxBytes;) {
    sizes.push_back(b);
    size_t next = o.stepFactor > 1.0 ? static_cast<size_t>(static_cast<double>(b) * o.stepFactor) : b + o.stepBytes;
    if (next <= b) next = b + 1;
    b = next;
  }
  return sizes;
}

void fitShapeToPlan(Shape& s, Collective c, uint64_t inputChunks) {
  if (s.sendElements % inputChunks == 0) return;
  if (c == Collective::AllGather || c == Collective::ReduceScatter || c == Collective::AllToAll) return;  // run() names it
  s.callCount = s.totalElements = s.sendElements = s.recvElements = s.sendElements / inputChunks * inputChunks;
}

std::vector<Row> runSweep(HostCollectives& hc, const Options& opts, Collective c, HostPlanExecutor* plan) {
  if (opts.preMul) throw Error(ErrorCode::InvalidUsage, "-o premulsum is a GPU op (NCCL's PreMulSum): not on host buffers");
  Communicator& comm = hc.communicator();
  size_t es = dataTypeSize(opts.type);
  std::vector<Row> rows;
  std::vector<char> send, recv;
  for (size_t bytes : sweepSizes(opts)) {
    Row row;
    row.shape = shapeFor(c, bytes, es, comm.size());
    if (plan) fitShapeToPlan(row.shape, c, plan->plan().inputChunks);
    row.bytes = row.shape.totalElements * es;
    send.assign(std::max(row.shape.sendElements, row.shape.recvElements) * es + 64, 0);
    recv.assign(row.shape.recvElements * es + 64, 0);
    for (bool inPlace : {false, true}) {
      Call call{c, opts.type, opts.op, opts.root, comm.rank(), comm.size(), row.shape, inPlace, &send, &recv, plan};
      Measure m = measure(hc, opts, call);
      setBandwidth(m, row.bytes, c, comm.size());
      (inPlace ? row.inPlace : row.outOfPlace) = m;
    }
    rows.push_back(row);
  }
  return rows;
}

}  // namespace plugboard::perf
