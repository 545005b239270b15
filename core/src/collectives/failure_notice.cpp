#include "collectives/failure_notice.hpp"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "collectives/collective_kind.hpp"
#include "plugboard/error.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {

namespace {

/// Posts the notice on link if it has a free slot; true when done with the
/// link (posted, or the connection refused it).
bool tryNotice(int peer, PeerLink& link, const CallSignature& call, const std::string& reason) {
  try {
    if (!link.canSend()) return false;
    ChunkHeader h = stampHeader(call, std::min(reason.size(), link.chunkBytes()));
    h.kind = static_cast<uint8_t>(CollectiveKind::FailureNotice);
    h.reserved = call.kind;  // the failed call's kind, for the peer's message
    link.send(h, reason.data(), h.bytes);
  } catch (const std::exception& e) {
    PB_LOG(Info, "COLL", "no failure notice to rank " << peer << ": " << e.what());
  }
  return true;
}

/// How long a failing rank waits for a full link to free a slot: a peer
/// that is still working returns its credits within microseconds; one that
/// does not is left to its timeout.
constexpr std::chrono::milliseconds kNoticeGrace{200};

}  // namespace

void sendFailureNotices(const std::map<int, std::unique_ptr<PeerLink>>& links, const CallSignature& call,
                        const std::string& reason) noexcept {
  std::vector<std::pair<int, PeerLink*>> waiting;
  for (const auto& [peer, link] : links) waiting.emplace_back(peer, link.get());
  const auto deadline = std::chrono::steady_clock::now() + kNoticeGrace;
  for (;;) {
    waiting.erase(std::remove_if(waiting.begin(), waiting.end(),
                                 [&](const auto& w) { return tryNotice(w.first, *w.second, call, reason); }),
                  waiting.end());
    if (waiting.empty() || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  for (const auto& w : waiting)
    PB_LOG(Info, "COLL", "no failure notice to rank " << w.first << ": no free slot within " << kNoticeGrace.count()
                                                      << " ms");
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
    for (const auto& [peer, link] : links)
      for (uint64_t i = 0, n = link->landedCount(); i < n; ++i)
        if (isFailureNotice(link->headerAt(i))) return peerFailure(comm, *link, i);
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace plugboard
