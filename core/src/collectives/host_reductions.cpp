// The collectives that reduce: allreduce, reducescatter, reduce.
//
// Small messages (<= allreduce_small_bytes) take one step: every rank sends
// its whole vector where it is needed and the receiver reduces in rank
// order. A small allreduce on a power-of-two number of ranks exchanges its
// partial result with one partner per round instead (recursive doubling:
// log2(n) messages per rank, not n - 1; on a host whose ranks outnumber its
// cores the messages, not the rounds, cost), reducing each chunk as it
// lands, straight from the link's inbox. Partners combine the lower group's
// partial first, so every rank gets the same bits (on 2 ranks, rank order;
// above, not the rank-order rounding of the one-step path). On 4, 8, 16...
// ranks, from above allreduce_doubling_bytes up to allreduce_halving_bytes,
// Rabenseifner's halving and doubling (allReduceHalving).
// Large messages take two: a direct reduce-scatter (rank j reduces segment
// j from every peer) then a direct gather/allgather of the reduced
// segments. Each byte crosses the wire (n-1)/n times per step, as in a ring,
// but in 2 steps instead of 2(n-1), and chunks pipeline through the slots.
#include <algorithm>
#include <cstring>

#include "collectives/host_collectives_impl.hpp"
#include "collectives/reduce_kernels.hpp"
#include "collectives/segment_reduction.hpp"

namespace plugboard {

void HostCollectives::Impl::reduceScatterSegments(const CallSignature& call, const char* send, char* acc,
                                                 const std::vector<Segment>& segs, DataType type, ReduceOp op) {
  size_t es = dataTypeSize(type);
  const Segment& mine = segs[rank];
  SegmentReduction reduction(send + mine.begin * es, acc, mine.count * es, type, op);
  std::vector<SendJob> sends;
  std::vector<RecvJob> recvs;
  for (auto& [p, l] : links) {
    sends.push_back({l.get(), send + segs[p].begin * es, segs[p].count * es, call});
    recvs.push_back({l.get(), mine.count * es, reduction.consumer(), call});
  }
  runDirect(sends, recvs, nranks - 1);
  reduction.finish();
}

void HostCollectives::Impl::allReduceOneStep(const CallSignature& call, const char* send, char* recv, size_t count,
                                             DataType type, ReduceOp op) {
  size_t bytes = count * dataTypeSize(type);
  char* all = scratchOf(bytes * nranks);  // rank r's vector at all + r * bytes
  copyBytes(all + rank * bytes, send, bytes);
  std::vector<SendJob> sends;
  std::vector<RecvJob> recvs;
  for (auto& [p, l] : links) {
    sends.push_back({l.get(), send, bytes, call});
    recvs.push_back({l.get(), bytes, copyInto(all + p * bytes), call});
  }
  run(sends, recvs);
  // Rank order on every rank: every rank gets bit-identical results.
  copyBytes(recv, all, bytes);
  for (int r = 1; r < nranks; ++r) plugboard::reduceInto(recv, all + r * bytes, count, type, op);
  finishAverage(recv, count, type, op, nranks);
}

void HostCollectives::Impl::allReduceDoubling(const CallSignature& call, const char* send, char* recv, size_t count,
                                              DataType type, ReduceOp op) {
  const size_t es = dataTypeSize(type), bytes = count * es;
  int rounds = 0;
  for (int d = 1; d < nranks; d <<= 1) ++rounds;
  // Each round reads the partial so far (`mine`) and writes the next one
  // into the other of two buffers: a partner's chunk may land before this
  // rank's own send of the round has taken its bytes, so a round never
  // writes what it sends. The last round writes recv, unless that would
  // make the first round write its own input (in place, odd rounds): then
  // the last writes scratch and one copy ends the call.
  char* scratch = scratchOf(bytes);
  const bool lastInScratch = (rounds % 2 == 1) && send == recv;
  char* last = lastInScratch ? scratch : recv;
  char* other = lastInScratch ? recv : scratch;
  const char* mine = send;
  for (int round = 0, distance = 1; round < rounds; ++round, distance <<= 1) {
    char* next = (rounds - 1 - round) % 2 == 0 ? last : other;
    const int partner = rank ^ distance;
    // The lower group's partial is the left operand on both partners: the same bits on every rank.
    const bool theirsFirst = partner < rank;
    ChunkConsumer combine = [=](size_t offset, const char* theirs, size_t n) {
      const char* left = theirsFirst ? theirs : mine + offset;
      const char* right = theirsFirst ? mine + offset : theirs;
      plugboard::reduceOutOf(next + offset, left, right, n / es, type, op);
    };
    PeerLink* l = link(partner);
    std::vector<SendJob> sends{{l, mine, bytes, call}};
    std::vector<RecvJob> recvs{{l, bytes, combine, call}};
    run(sends, recvs);
    mine = next;
  }
  if (lastInScratch) copyBytes(recv, scratch, bytes);
  finishAverage(recv, count, type, op, nranks);
}

void HostCollectives::Impl::allReduceHalving(const CallSignature& call, const char* send, char* recv, size_t count,
                                             DataType type, ReduceOp op) {
  const size_t es = dataTypeSize(type);
  const auto segs = splitSegments(count, nranks);
  // Elements [first, end) of segments [lo, hi): contiguous.
  auto span = [&](int lo, int hi) { return std::make_pair(segs[lo].begin, segs[hi - 1].begin + segs[hi - 1].count); };
  // Reduce-scatter by recursive halving: each round gives the partner the
  // half of this rank's segments that the partner keeps and reduces the
  // partner's partial of the other half into recv. What a round sends and
  // what it writes are disjoint halves, so recv may be both; the first
  // round reads the input (in place, the same memory).
  const char* partial = send;
  int lo = 0, width = nranks;
  for (int distance = nranks / 2; distance >= 1; distance /= 2) {
    const int partner = rank ^ distance;
    const bool keepLower = (rank & distance) == 0;
    const int keptLo = keepLower ? lo : lo + width / 2, gaveLo = keepLower ? lo + width / 2 : lo;
    const auto [keptBegin, keptEnd] = span(keptLo, keptLo + width / 2);
    const auto [gaveBegin, gaveEnd] = span(gaveLo, gaveLo + width / 2);
    const bool theirsFirst = partner < rank;  // the lower rank's partial is the left operand
    const char* mine = partial + keptBegin * es;
    char* out = recv + keptBegin * es;
    ChunkConsumer combine = [=](size_t offset, const char* theirs, size_t n) {
      const char* own = mine + offset;
      plugboard::reduceOutOf(out + offset, theirsFirst ? theirs : own, theirsFirst ? own : theirs, n / es, type, op);
    };
    PeerLink* l = link(partner);
    std::vector<SendJob> sends{{l, partial + gaveBegin * es, (gaveEnd - gaveBegin) * es, call}};
    std::vector<RecvJob> recvs{{l, (keptEnd - keptBegin) * es, combine, call}};
    run(sends, recvs);
    partial = recv;
    lo = keptLo;
    width /= 2;
  }
  finishAverage(recv + segs[rank].begin * es, segs[rank].count, type, op, nranks);
  // Allgather by recursive doubling: swap the segments held with the
  // partner's, straight into place.
  for (int distance = 1; distance < nranks; distance *= 2) {
    const int partner = rank ^ distance;
    const int theirLo = lo ^ distance;  // the partner's block of `width` segments
    const auto [mineBegin, mineEnd] = span(lo, lo + width);
    const auto [theirBegin, theirEnd] = span(theirLo, theirLo + width);
    PeerLink* l = link(partner);
    std::vector<SendJob> sends{{l, recv + mineBegin * es, (mineEnd - mineBegin) * es, call}};
    std::vector<RecvJob> recvs{copyJob(l, (theirEnd - theirBegin) * es, recv + theirBegin * es, call)};
    run(sends, recvs);
    lo = std::min(lo, theirLo);
    width *= 2;
  }
}

void HostCollectives::Impl::allReduceTwoStep(const CallSignature& call, const char* send, char* recv, size_t count,
                                             DataType type, ReduceOp op) {
  size_t es = dataTypeSize(type);
  auto segs = splitSegments(count, nranks);
  const Segment& mine = segs[rank];
  reduceScatterSegments(call, send, recv + mine.begin * es, segs, type, op);
  finishAverage(recv + mine.begin * es, mine.count, type, op, nranks);
  std::vector<SendJob> sends;
  std::vector<RecvJob> recvs;
  for (auto& [p, l] : links) {
    sends.push_back({l.get(), recv + mine.begin * es, mine.count * es, call});
    recvs.push_back(copyJob(l.get(), segs[p].count * es, recv + segs[p].begin * es, call));
  }
  runDirect(sends, recvs, nranks - 1);
}

void HostCollectives::allReduce(const void* sendv, void* recvv, size_t count, DataType type, ReduceOp op) {
  Impl& m = *impl_;
  checkOp("allreduce", op);
  size_t bytes = checkedBytes("allreduce", sendv, recvv, count, type, 1);
  auto call = m.nextCall(CollectiveKind::AllReduce, type, op, -1, count);
  const char* send = static_cast<const char*>(sendv);
  char* recv = static_cast<char*>(recvv);
  if (m.nranks == 1) {
    if (send != recv) copyBytes(recv, send, bytes);
    return;
  }
  if (m.servedByPlan(call, "allreduce", bytes, send, recv, count, type, op)) return;
  const bool powerOfTwo = (m.nranks & (m.nranks - 1)) == 0;
  // Halving from above the doubling limit: at 64 KiB it took 0.87-0.91x
  // doubling's time at 4 and 8 ranks (2 and 16 cores), at 32 KiB 1.1x.
  const size_t halvingFrom = std::min(m.doublingBytes, m.smallBytes);
  const bool halving = powerOfTwo && m.nranks >= 4 && bytes > halvingFrom && bytes <= m.halvingBytes;
  if (halving) m.allReduceHalving(call, send, recv, count, type, op);
  else if (bytes <= m.smallBytes && powerOfTwo) m.allReduceDoubling(call, send, recv, count, type, op);
  else if (bytes <= m.smallBytes) m.allReduceOneStep(call, send, recv, count, type, op);
  else m.allReduceTwoStep(call, send, recv, count, type, op);
}

void HostCollectives::reduceScatter(const void* sendv, void* recvv, size_t count, DataType type, ReduceOp op) {
  Impl& m = *impl_;
  checkOp("reducescatter", op);
  checkedBytes("reducescatter", sendv, recvv, count, type, static_cast<size_t>(m.nranks));
  auto call = m.nextCall(CollectiveKind::ReduceScatter, type, op, -1, count);
  const size_t inputCount = count * static_cast<size_t>(m.nranks);
  if (m.servedByPlan(call, "reducescatter", inputCount * dataTypeSize(type), sendv, recvv, inputCount, type, op)) return;
  // Blocks of count elements are exactly the segments of n * count elements.
  std::vector<Segment> segs(static_cast<size_t>(m.nranks));
  for (int j = 0; j < m.nranks; ++j) segs[j] = {static_cast<size_t>(j) * count, count};
  m.reduceScatterSegments(call, static_cast<const char*>(sendv), static_cast<char*>(recvv), segs, type, op);
  finishAverage(recvv, count, type, op, m.nranks);
}

void HostCollectives::reduce(const void* sendv, void* recvv, size_t count, DataType type, ReduceOp op, int root) {
  Impl& m = *impl_;
  checkOp("reduce", op);
  checkRoot("reduce", root, m.nranks);
  bool isRoot = m.rank == root;
  size_t bytes = checkedBytes("reduce", sendv, isRoot ? recvv : sendv, count, type, 1);
  auto call = m.nextCall(CollectiveKind::Reduce, type, op, root, count);
  const char* send = static_cast<const char*>(sendv);
  char* recv = static_cast<char*>(recvv);
  size_t es = dataTypeSize(type);
  if (m.nranks == 1) {
    if (send != recv) copyBytes(recv, send, bytes);
    return;
  }
  std::vector<SendJob> sends;
  std::vector<RecvJob> recvs;
  if (bytes <= m.smallBytes) {
    if (!isRoot) {
      sends.push_back({m.link(root), send, bytes, call});
      m.run(sends, recvs);
      return;
    }
    char* all = m.scratchOf(bytes * m.nranks);
    copyBytes(all + m.rank * bytes, send, bytes);
    for (auto& [p, l] : m.links) recvs.push_back({l.get(), bytes, copyInto(all + p * bytes), call});
    m.run(sends, recvs);
    copyBytes(recv, all, bytes);
    for (int r = 1; r < m.nranks; ++r) plugboard::reduceInto(recv, all + r * bytes, count, type, op);
    finishAverage(recv, count, type, op, m.nranks);
    return;
  }
  auto segs = splitSegments(count, m.nranks);
  const Segment& mine = segs[m.rank];
  char* acc = isRoot ? recv + mine.begin * es : m.scratchOf(mine.count * es);
  m.reduceScatterSegments(call, send, acc, segs, type, op);
  finishAverage(acc, mine.count, type, op, m.nranks);
  if (!isRoot) {
    sends.push_back({m.link(root), acc, mine.count * es, call});
  } else {
    for (auto& [p, l] : m.links) recvs.push_back(copyJob(l.get(), segs[p].count * es, recv + segs[p].begin * es, call));
  }
  m.runDirect(sends, recvs);
}

}  // namespace plugboard
