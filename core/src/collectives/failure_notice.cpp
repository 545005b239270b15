#include "collectives/failure_notice.hpp"

#include <algorithm>

#include "collectives/collective_kind.hpp"
#include "plugboard/error.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {

void sendFailureNotices(const std::map<int, std::unique_ptr<PeerLink>>& links, const CallSignature& call,
                        const std::string& reason) noexcept {
  for (const auto& [peer, link] : links) {
    try {
      if (!link->canSend()) continue;
      ChunkHeader h{};
      h.magic = kChunkMagic;
      h.kind = static_cast<uint8_t>(CollectiveKind::FailureNotice);
      h.dtype = call.dtype;
      h.op = call.op;
      h.reserved = call.kind;  // the failed call's kind, for the peer's message
      h.root = call.root;
      h.opSeq = call.opSeq;
      h.count = call.count;
      h.bytes = std::min(reason.size(), link->chunkBytes());
      link->send(h, reason.data(), h.bytes);
    } catch (const std::exception& e) {
      PB_LOG(Info, "COLL", "no failure notice to rank " << peer << ": " << e.what());
    }
  }
}

bool isFailureNotice(const ChunkHeader& h) {
  return h.magic == kChunkMagic && h.kind == static_cast<uint8_t>(CollectiveKind::FailureNotice);
}

void throwPeerFailure(Communicator& comm, const PeerLink& link) {
  const ChunkHeader& h = link.header();
  const std::string reason(link.payload(), std::min<size_t>(h.bytes, link.chunkBytes()));
  const uint8_t failedKind = h.reserved < static_cast<uint8_t>(CollectiveKind::FailureNotice) ? h.reserved : 0;
  throw Error(ErrorCode::Remote, "rank " + std::to_string(comm.rank()) + " (host " + comm.hostOf(comm.rank()) +
                                     "): " + link.describePeer() + " failed in its " +
                                     describeCall(failedKind, h.dtype, h.op, h.root, h.count) + " #" +
                                     std::to_string(h.opSeq) + " and told its peers: " + reason);
}

}  // namespace plugboard
