#include "collectives/failure_notice.hpp"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "collectives/bootstrap_tags.hpp"
#include "collectives/collective_kind.hpp"
#include "communicator/wire.hpp"
#include "plugboard/bootstrap.hpp"
#include "plugboard/error.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {

namespace {

/// What became of a notice on a link.
enum class Notice { Posted, Full, Refused };

/// Posts the notice on link if it has a free slot.
Notice tryNotice(int peer, PeerLink& link, const CallSignature& call, const std::string& reason) {
  try {
    if (!link.canSend()) return Notice::Full;
    ChunkHeader h = stampHeader(call, std::min(reason.size(), link.chunkBytes()));
    h.kind = static_cast<uint8_t>(CollectiveKind::FailureNotice);
    h.reserved = call.kind;  // the failed call's kind, for the peer's message
    link.send(h, reason.data(), h.bytes);
    return Notice::Posted;
  } catch (const std::exception& e) {
    PB_LOG(Info, "COLL", "no failure notice to rank " << peer << " over its link: " << e.what());
    return Notice::Refused;
  }
}

/// Sends the notice through the bootstrap: the call's fields, then the reason.
void sendOutOfBand(Communicator& comm, int peer, const CallSignature& call, const std::string& reason) {
  BlobWriter w;
  for (int32_t v : {int32_t(call.kind), int32_t(call.dtype), int32_t(call.op), call.root}) w.i32(v);
  w.u64(call.count);
  w.u64(call.opSeq);
  w.str(reason);
  try {
    comm.bootstrap().send(w.data().data(), w.data().size(), peer, kNoticeTag);
    PB_LOG(Info, "COLL", "failure notice to rank " << peer << " sent through the bootstrap (its link could not take it)");
  } catch (const std::exception& e) {
    PB_LOG(Info, "COLL", "no failure notice to rank " << peer << ": " << e.what());
  }
}

/// The error an out-of-band notice from link's peer stands for.
Error outOfBandFailure(Communicator& comm, const PeerLink& link, const std::vector<char>& message) {
  const std::string me = "rank " + std::to_string(comm.rank()) + " (host " + comm.hostOf(comm.rank()) + "): ";
  try {
    BlobReader r(message, link.describePeer());
    int32_t kind = r.i32(), dtype = r.i32(), op = r.i32(), root = r.i32();
    const uint64_t count = r.u64(), opSeq = r.u64();
    const std::string reason = r.str();
    if (!r.done() || kind < 0 || kind >= int32_t(CollectiveKind::FailureNotice) || dtype < 0 || dtype > 255 ||
        op < 0 || op > 255)
      throw Error(ErrorCode::Remote, "fields out of range");
    return Error(ErrorCode::Remote, me + link.describePeer() + " failed in its " +
                                        describeCall(uint8_t(kind), uint8_t(dtype), uint8_t(op), root, count) + " #" +
                                        std::to_string(opSeq) + " and told its peers (through the bootstrap): " +
                                        reason);
  } catch (const Error& e) {
    return Error(ErrorCode::Remote, me + link.describePeer() + " sent a malformed failure notice: " + e.what());
  }
}

/// The failure link's peer sent out of band, if it did (PeerLink::pollBootstrap).
std::optional<Error> outOfBandNotice(Communicator& comm, PeerLink& link) {
  link.pollBootstrap(comm);
  if (!link.outOfBandNotice()) return std::nullopt;
  return outOfBandFailure(comm, link, *link.outOfBandNotice());
}

/// How long a failing rank waits for a full link to free a slot: a peer
/// that is still working returns its credits within microseconds; one that
/// does not is left to its timeout.
constexpr std::chrono::milliseconds kNoticeGrace{200};

}  // namespace

void sendFailureNotices(Communicator& comm, const std::map<int, std::unique_ptr<PeerLink>>& links,
                        const CallSignature& call, const std::string& reason) noexcept {
  std::vector<std::pair<int, PeerLink*>> waiting;
  for (const auto& [peer, link] : links) waiting.emplace_back(peer, link.get());
  const auto deadline = std::chrono::steady_clock::now() + kNoticeGrace;
  for (;;) {
    waiting.erase(std::remove_if(waiting.begin(), waiting.end(),
                                 [&](const auto& w) {
                                   const Notice n = tryNotice(w.first, *w.second, call, reason);
                                   if (n == Notice::Refused) sendOutOfBand(comm, w.first, call, reason);
                                   return n != Notice::Full;
                                 }),
                  waiting.end());
    if (waiting.empty() || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  for (const auto& w : waiting) {
    PB_LOG(Info, "COLL", "no free slot to rank " << w.first << " within " << kNoticeGrace.count() << " ms");
    sendOutOfBand(comm, w.first, call, reason);
  }
}

bool isFailureNotice(const ChunkHeader& h) {
  return h.magic == kChunkMagic && h.kind == static_cast<uint8_t>(CollectiveKind::FailureNotice);
}

Error peerFailure(Communicator& comm, const PeerLink& link, uint64_t behind) {
  const ChunkHeader& h = link.headerAt(behind);
  const std::string reason(link.payloadAt(behind), std::min<size_t>(h.bytes, link.chunkBytes()));
  const uint8_t failedKind = h.reserved < static_cast<uint8_t>(CollectiveKind::FailureNotice) ? h.reserved : 0;
  return Error(ErrorCode::Remote, "rank " + std::to_string(comm.rank()) + " (host " + comm.hostOf(comm.rank()) +
                                      "): " + link.describePeer() + " failed in its " +
                                      describeCall(failedKind, h.dtype, h.op, h.root, h.count) + " #" +
                                      std::to_string(h.opSeq) + " and told its peers: " + reason);
}

void throwPeerFailure(Communicator& comm, const PeerLink& link) { throw peerFailure(comm, link); }

std::optional<Error> landedPeerFailure(Communicator& comm, const std::map<int, std::unique_ptr<PeerLink>>& links,
                                       std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    for (const auto& [peer, link] : links) {
      for (uint64_t i = 0, n = link->landedCount(); i < n; ++i)
        if (isFailureNotice(link->headerAt(i))) return peerFailure(comm, *link, i);
      if (auto notice = outOfBandNotice(comm, *link)) return notice;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace plugboard
