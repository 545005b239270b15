// Construction, shared helpers, and the collectives that move data without
// reducing it. The reducing ones are in host_reductions.cpp.
#include <algorithm>
#include <cstring>
#include <map>
#include <thread>

#include "collectives/bootstrap_tags.hpp"
#include "collectives/failure_notice.hpp"
#include "collectives/host_collectives_impl.hpp"
#include "plugboard/error.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {
namespace {

/// How long a rank whose connection failed looks for a peer's failure
/// notice that explains it (failure_notice.hpp).
constexpr std::chrono::milliseconds kNoticeWait{50};

size_t chunkSetting(const Config& c) {
  int64_t v = c.getInt("host_chunk_bytes");
  if (v < 4096 || v % 64 != 0 || v > (int64_t{1} << 30))
    throw Error(ErrorCode::Config, "host_chunk_bytes must be a multiple of 64 between 4096 and 1 GiB, got " + std::to_string(v));
  return static_cast<size_t>(v);
}

int slotSetting(const Config& c) {
  int64_t v = c.getInt("host_slots");
  if (v < 1 || v > 64) throw Error(ErrorCode::Config, "host_slots must be 1-64, got " + std::to_string(v));
  return static_cast<int>(v);
}

/// A byte-count setting (an algorithm's line): refuses a negative value by name.
size_t bytesSetting(const Config& c, const char* key) {
  const int64_t v = c.getInt(key);
  if (v < 0) throw Error(ErrorCode::Config, std::string(key) + " must be >= 0, got " + std::to_string(v));
  return static_cast<size_t>(v);
}

}  // namespace

HostCollectives::HostCollectives(Communicator& comm) : impl_(std::make_unique<Impl>(comm)) {
  Impl& m = *impl_;
  m.rank = comm.rank();
  m.nranks = comm.size();
  m.timeout = comm.defaultTimeout();
  const double closeSeconds = comm.config().getDouble("close_timeout");
  if (!(closeSeconds >= 0 && closeSeconds <= 86400))
    throw Error(ErrorCode::Config, "close_timeout must be 0-86400 seconds, got " + std::to_string(closeSeconds));
  m.closeTimeout = std::chrono::milliseconds(static_cast<int64_t>(closeSeconds * 1000));
  size_t chunk = chunkSetting(comm.config());
  int slots = slotSetting(comm.config());
  m.smallBytes = bytesSetting(comm.config(), "allreduce_small_bytes");
  m.halvingBytes = bytesSetting(comm.config(), "allreduce_halving_bytes");
  m.doublingBytes = bytesSetting(comm.config(), "allreduce_doubling_bytes");
  m.gatherDoublingBytes = bytesSetting(comm.config(), "allgather_doubling_bytes");
  m.direct.minBytes = bytesSetting(comm.config(), "host_direct_bytes");
  const int64_t piece = comm.config().getInt("host_direct_piece_bytes");
  if (piece < 4096)
    throw Error(ErrorCode::Config, "host_direct_piece_bytes must be at least 4096, got " + std::to_string(piece));
  m.direct.pieceBytes = static_cast<size_t>(piece) / 4096 * 4096;  // whole elements of every type
  // A direct transfer's target is registered with one transport: failover
  // could not move it, so with failover every message goes in chunks.
  m.failover = comm.config().getBool("failover");
  if (m.failover) m.direct.minBytes = 0;
  m.coresScarce.assign(static_cast<size_t>(m.nranks), false);
  for (int p = 0; p < m.nranks; ++p) m.coresScarce[p] = comm.coresScarceOn(m.rank) || comm.coresScarceOn(p);
  m.direct.coresScarce = &m.coresScarce;
  auto conns = comm.connectAll();
  for (auto& [peer, conn] : conns)  // ascending peers: a consistent order on every rank
    m.links[peer] = std::make_unique<PeerLink>(comm, conn, chunk, slots, kLinkTag);
  // A "closing" or an out-of-band failure notice that an earlier host
  // collectives on this bootstrap sent and nobody took (its receiver had
  // aborted or failed) arrived before the peer's link descriptor above:
  // drop it, or this instance would take it for the peer's.
  if (comm.bootstrap().canPoll())
    for (const auto& [peer, link] : m.links)
      for (int tag : {kCloseTag, kNoticeTag})
        while (comm.bootstrap().poll(peer, tag)) comm.bootstrap().recv(peer, tag);
  if (!comm.config().planRules().empty() && m.failover) {
    // A plan's channels have no resend: a failed pair would end its call
    // and every later one. The built-in algorithms move it and go on.
    PB_LOG(Warn, "COLL", "rank " << m.rank << ": the YAML's plans are set aside: failover is on, and only the "
                                     "built-in host collectives fail over");
  } else if (!comm.config().planRules().empty()) {
    m.plans = std::make_unique<HostPlanSelection>(comm);
    // A plan call ends when a peer's call failed and said so (its notice
    // lands on the links, or through the bootstrap), as built-in calls do.
    m.plans->whileWaiting([&m] {
      if (const std::optional<Error> e = landedPeerFailure(m.comm, m.links, std::chrono::milliseconds(0))) throw *e;
    });
  }
  PB_LOG(Info, "COLL", "host collectives ready: " << m.links.size() << " peers, chunk " << chunk << " B x " << slots
                                                 << " slots, one-step up to " << m.smallBytes << " B");
}

HostCollectives::~HostCollectives() {
  try {
    impl_->closeLinks();
  } catch (const std::exception& e) {
    PB_LOG(Warn, "COLL", "rank " << impl_->rank << ": closing host collectives: " << e.what());
  }
}

void HostCollectives::Impl::closeLinks() {
  if (links.empty()) return;
  if (!comm.bootstrap().canPoll()) {
    PB_LOG(Info, "COLL", "rank " << rank << ": the bootstrap cannot poll; host collectives close without waiting for peers");
    return;
  }
  // After an abort or a failed call the peers may be anywhere: say
  // "closing" (so no peer waits for this rank) but wait for nobody.
  const bool wait = !callFailed && !comm.aborted() && closeTimeout.count() > 0;
  const auto deadline = std::chrono::steady_clock::now() + closeTimeout;
  auto left = [&] {
    return std::max(std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                       deadline - std::chrono::steady_clock::now()));
  };
  // This rank's own writes complete while every peer still listens: a peer
  // closes only after this rank's word, which follows them.
  // The word goes to every peer, a failed link's too: the peer may not
  // know of the failure yet and would wait its close_timeout for it.
  std::map<int, PeerLink*> waiting;
  for (auto& [peer, link] : links) {
    bool flushed = wait;
    try {
      if (wait) link->connection().flush(left());
    } catch (const std::exception& e) {
      flushed = false;
      PB_LOG(Info, "COLL", "rank " << rank << ": closing without waiting for " << link->describePeer() << ": "
                                   << e.what());
    }
    try {
      const char closing = 1;
      comm.bootstrap().send(&closing, 1, peer, kCloseTag);
      if (flushed) waiting[peer] = link.get();
    } catch (const std::exception& e) {
      PB_LOG(Info, "COLL", "rank " << rank << ": could not tell " << link->describePeer() << " it closes: " << e.what());
    }
  }
  // Peers still in their last call may post to this rank until their word
  // comes: keep the connections moving (some transports land writes only
  // when the target drives them).
  while (!waiting.empty() && std::chrono::steady_clock::now() < deadline) {
    for (auto it = waiting.begin(); it != waiting.end();) {
      if (comm.bootstrap().poll(it->first, kCloseTag)) {
        comm.bootstrap().recv(it->first, kCloseTag);
        it = waiting.erase(it);
      } else if (it->second->connectionFailed() || comm.bootstrap().peerClosed(it->first)) {
        it = waiting.erase(it);  // gone without a word: it posts nothing more either
      } else {
        ++it;
      }
    }
    if (!waiting.empty()) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  for (const auto& [peer, link] : waiting)
    PB_LOG(Warn, "COLL", "rank " << rank << ": " << link->describePeer() << " did not close host collectives within "
                                 << closeTimeout.count() << " ms (close_timeout); closing anyway");
}

Communicator& HostCollectives::communicator() const { return impl_->comm; }

uint64_t HostCollectives::callsServedByPlans() const { return impl_->plans ? impl_->plans->callsServed() : 0; }

CallSignature HostCollectives::Impl::nextCall(CollectiveKind kind, DataType type, ReduceOp op, int root, size_t count) {
  CallSignature c;
  c.kind = static_cast<uint8_t>(kind);
  c.dtype = static_cast<uint8_t>(type);
  c.op = collectiveReduces(kind) ? static_cast<uint8_t>(op) : 0;
  c.root = root;
  c.count = count;
  c.opSeq = ++opSeq;
  return c;
}

void HostCollectives::Impl::run(std::vector<SendJob>& sends, std::vector<RecvJob>& recvs) {
  exchange(sends, recvs, DirectPolicy());
}

void HostCollectives::Impl::runDirect(std::vector<SendJob>& sends, std::vector<RecvJob>& recvs, int peersAtOnce) {
  DirectPolicy policy = direct;
  policy.peersAtOnce = peersAtOnce;
  exchange(sends, recvs, policy);
}

void HostCollectives::Impl::exchange(std::vector<SendJob>& sends, std::vector<RecvJob>& recvs,
                                     const DirectPolicy& policy) {
  try {
    runExchange(comm, sends, recvs, links, timeout, policy, failover);
  } catch (const Error& e) {
    failCall(e, !recvs.empty() ? recvs[0].call : !sends.empty() ? sends[0].call : CallSignature{});
  } catch (...) {
    callFailed = true;
    throw;
  }
}

bool HostCollectives::Impl::servedByPlan(const CallSignature& call, const char* collective, size_t bytes,
                                         const void* input, void* output, size_t inputCount, DataType type,
                                         ReduceOp op) {
  try {
    return plans && plans->run(collective, bytes, input, output, inputCount, type, op);
  } catch (const Error& e) {
    failCall(e, call);
  } catch (...) {
    callFailed = true;
    throw;
  }
}

void HostCollectives::Impl::failCall(const Error& e, const CallSignature& call) {
  callFailed = true;
  // Not after an abort: it is local, and its connections refuse posts.
  if (e.code() == ErrorCode::Aborted) throw;
  // A connection that closed under this call usually closed because its
  // peer failed; that peer's notice, if it lands soon, says why.
  const auto wait = e.code() == ErrorCode::Remote ? kNoticeWait : std::chrono::milliseconds(0);
  const std::optional<Error> cause = landedPeerFailure(comm, links, wait);
  // Peers blocked on this rank learn now rather than at their timeouts.
  sendFailureNotices(comm, links, call, cause ? cause->what() : e.what());
  if (cause) throw *cause;
  throw;
}

char* HostCollectives::Impl::scratchOf(size_t bytes) {
  if (scratch.size() < bytes) scratch.resize(bytes);
  return scratch.data();
}

void HostCollectives::allGather(const void* sendv, void* recvv, size_t count, DataType type) {
  Impl& m = *impl_;
  size_t bytes = checkedBytes("allgather", sendv, recvv, count, type, static_cast<size_t>(m.nranks));
  auto call = m.nextCall(CollectiveKind::AllGather, type, ReduceOp::Sum, -1, count);
  if (m.servedByPlan(call, "allgather", bytes * m.nranks, sendv, recvv, count, type, ReduceOp::Sum)) return;
  char* recv = static_cast<char*>(recvv);
  char* mine = recv + m.rank * bytes;
  if (sendv != mine && bytes) std::memmove(mine, sendv, bytes);
  const bool powerOfTwo = (m.nranks & (m.nranks - 1)) == 0;
  // Doubling beyond the small sizes: at 128 KiB gathered it took 0.70-0.76x
  // the direct exchange's time at 4 and 8 ranks on 16 cores.
  if (m.nranks > 2 && powerOfTwo && bytes * m.nranks <= m.gatherDoublingBytes)
    return m.allGatherDoubling(call, recv, bytes);
  if (m.nranks > 2 && !powerOfTwo && bytes * m.nranks <= m.smallBytes)
    return m.allGatherBruck(call, mine, recv, bytes);
  std::vector<SendJob> sends;
  std::vector<RecvJob> recvs;
  for (auto& [p, link] : m.links) {
    sends.push_back({link.get(), mine, bytes, call});
    recvs.push_back(copyJob(link.get(), bytes, recv + p * bytes, call));
  }
  m.runDirect(sends, recvs, m.nranks - 1);
}

void HostCollectives::Impl::allGatherDoubling(const CallSignature& call, char* recv, size_t bytes) {
  // Before the round at distance d, recv holds the blocks of this rank's
  // group: the d ranks that agree with it above bit log2(d). The partner's
  // group is the same size, so both sides send and receive d blocks in place.
  for (int distance = 1; distance < nranks; distance <<= 1) {
    const int partner = rank ^ distance;
    const size_t group = bytes * static_cast<size_t>(distance);
    PeerLink* l = link(partner);
    std::vector<SendJob> sends{{l, recv + static_cast<size_t>(rank & ~(distance - 1)) * bytes, group, call}};
    std::vector<RecvJob> recvs{copyJob(l, group, recv + static_cast<size_t>(partner & ~(distance - 1)) * bytes, call)};
    run(sends, recvs);
  }
}

void HostCollectives::Impl::allGatherBruck(const CallSignature& call, const char* mine, char* recv, size_t bytes) {
  // held: block i is rank (rank + i) % n's, for i < have.
  char* held = scratchOf(bytes * nranks);
  copyBytes(held, mine, bytes);
  for (int have = 1, distance = 1; have < nranks; distance <<= 1) {
    const int count = std::min(distance, nranks - have);
    std::vector<SendJob> sends{{link((rank - distance + nranks) % nranks), held, bytes * count, call}};
    std::vector<RecvJob> recvs{{link((rank + distance) % nranks), bytes * count, copyInto(held + bytes * have), call}};
    run(sends, recvs);
    have += count;
  }
  for (int i = 1; i < nranks; ++i) copyBytes(recv + bytes * ((rank + i) % nranks), held + bytes * i, bytes);
}

void HostCollectives::allToAll(const void* sendv, void* recvv, size_t count, DataType type) {
  Impl& m = *impl_;
  size_t bytes = checkedBytes("alltoall", sendv, recvv, count, type, static_cast<size_t>(m.nranks));
  auto call = m.nextCall(CollectiveKind::AllToAll, type, ReduceOp::Sum, -1, count);
  if (m.servedByPlan(call, "alltoall", bytes * m.nranks, sendv, recvv, count * m.nranks, type, ReduceOp::Sum)) return;
  char* recv = static_cast<char*>(recvv);
  const char* send = static_cast<const char*>(sendv);
  if (send == recv && bytes) {  // in place: blocks we receive would overwrite blocks not yet sent
    char* copy = m.scratchOf(bytes * m.nranks);
    copyBytes(copy, send, bytes * m.nranks);
    send = copy;
  }
  if (send + m.rank * bytes != recv + m.rank * bytes) copyBytes(recv + m.rank * bytes, send + m.rank * bytes, bytes);
  std::vector<SendJob> sends;
  std::vector<RecvJob> recvs;
  for (auto& [p, link] : m.links) {
    sends.push_back({link.get(), send + p * bytes, bytes, call});
    recvs.push_back(copyJob(link.get(), bytes, recv + p * bytes, call));
  }
  m.runDirect(sends, recvs, m.nranks - 1);
}

void HostCollectives::broadcast(const void* sendv, void* recvv, size_t count, DataType type, int root) {
  Impl& m = *impl_;
  checkRoot("broadcast", root, m.nranks);
  bool isRoot = m.rank == root;
  size_t bytes = checkedBytes("broadcast", isRoot ? sendv : recvv, recvv, count, type, 1);
  auto call = m.nextCall(CollectiveKind::Broadcast, type, ReduceOp::Sum, root, count);
  char* recv = static_cast<char*>(recvv);
  if (isRoot && sendv != recvv) copyBytes(recv, sendv, bytes);
  std::vector<SendJob> sends;
  std::vector<RecvJob> recvs;
  if (bytes <= m.smallBytes || m.nranks == 2) {
    if (isRoot) for (auto& [p, link] : m.links) sends.push_back({link.get(), recv, bytes, call});
    else recvs.push_back(copyJob(m.link(root), bytes, recv, call));
    m.runDirect(sends, recvs);
    return;
  }
  // Scatter segments from the root, then every rank shares its segment
  // with the non-roots: the root sends each byte about twice, not n-1 times.
  size_t es = dataTypeSize(type);
  auto segs = splitSegments(count, m.nranks);
  if (isRoot) {
    for (auto& [p, link] : m.links) sends.push_back({link.get(), recv + segs[p].begin * es, segs[p].count * es, call});
  } else {
    recvs.push_back(copyJob(m.link(root), segs[m.rank].count * es, recv + segs[m.rank].begin * es, call));
  }
  m.runDirect(sends, recvs);
  sends.clear();
  recvs.clear();
  for (auto& [p, link] : m.links) {
    if (p != root) sends.push_back({link.get(), recv + segs[m.rank].begin * es, segs[m.rank].count * es, call});
    if (!isRoot) recvs.push_back(copyJob(link.get(), segs[p].count * es, recv + segs[p].begin * es, call));
  }
  m.runDirect(sends, recvs);
}

void HostCollectives::send(const void* buf, size_t count, DataType type, int peer) {
  sendRecv(buf, count, peer, nullptr, 0, -1, type);
}

void HostCollectives::recv(void* buf, size_t count, DataType type, int peer) {
  sendRecv(nullptr, 0, -1, buf, count, peer, type);
}

void HostCollectives::sendRecv(const void* sendBuf, size_t sendCount, int sendPeer, void* recvBuf, size_t recvCount,
                               int recvPeer, DataType type) {
  Impl& m = *impl_;
  if (sendPeer >= 0) checkRoot("send: peer", sendPeer, m.nranks);
  if (recvPeer >= 0) checkRoot("recv: peer", recvPeer, m.nranks);
  size_t sendBytes = sendPeer >= 0 ? checkedBytes("send", sendBuf, sendBuf, sendCount, type, 1) : 0;
  size_t recvBytes = recvPeer >= 0 ? checkedBytes("recv", recvBuf, recvBuf, recvCount, type, 1) : 0;
  if (sendPeer == m.rank || recvPeer == m.rank) {
    if (sendPeer != recvPeer || sendCount != recvCount)
      throw Error(ErrorCode::InvalidUsage, "send/recv to self (rank " + std::to_string(m.rank) +
                                               ") needs sendRecv with both peers equal and equal counts");
    if (sendBytes && sendBuf != recvBuf) std::memmove(recvBuf, sendBuf, sendBytes);
    return;
  }
  const char* sendData = static_cast<const char*>(sendBuf);
  const char* recvData = static_cast<const char*>(recvBuf);
  if (sendBytes && recvBytes && sendData < recvData + recvBytes && recvData < sendData + sendBytes) {
    // The receive would overwrite bytes still to be sent: send a copy.
    char* copy = m.scratchOf(sendBytes);
    copyBytes(copy, sendData, sendBytes);
    sendData = copy;
  }
  std::vector<SendJob> sends;
  std::vector<RecvJob> recvs;
  auto stamp = [&](uint64_t seq, size_t count) {
    return CallSignature{static_cast<uint8_t>(CollectiveKind::SendRecv), static_cast<uint8_t>(type), 0, -1, seq, count};
  };
  if (sendPeer >= 0)
    sends.push_back({m.link(sendPeer), sendData, sendBytes, stamp(++m.sendSeq[sendPeer], sendCount)});
  if (recvPeer >= 0)
    recvs.push_back(
        copyJob(m.link(recvPeer), recvBytes, static_cast<char*>(recvBuf), stamp(++m.recvSeq[recvPeer], recvCount)));
  m.runDirect(sends, recvs);
}

}  // namespace plugboard
