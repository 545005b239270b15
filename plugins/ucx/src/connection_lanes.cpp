// Large writes over lanes (README "Lanes"): the sender cuts a write of at
// least lane_bytes into one piece per lane and sends, on the endpoint, a
// message that names the write and its lane-write number but carries no
// data. The target holds that message (and any signal in or after it)
// until each lane has landed its pieces up to that number, so a signal is
// still visible only after every earlier write (transport.h).
#include <algorithm>

#include "connection.hpp"
#include "error.hpp"

namespace plugboard::ucx {

namespace {

/// Pieces are cut at page boundaries.
constexpr size_t kPieceAlign = 4096;
/// A lane's pieces may run at most this far ahead of its last landed one
/// (more means a peer numbering them wrongly).
constexpr uint64_t kMaxPiecesAhead = uint64_t(1) << 16;

}  // namespace

// ---- the sender ------------------------------------------------------------------

void Connection::sendLaneWrite(Op& op, wire::AmHeader& h, const LocalRegion& src, size_t srcOffset, size_t size) {
  const auto lanes = static_cast<size_t>(usableLanes_);
  h.flags |= wire::AmHeader::kLaneWrite;
  h.laneWrite = ++laneWritesSent_;
  h.lanes = static_cast<uint32_t>(lanes);
  const size_t piece = (size / lanes + kPieceAlign) / kPieceAlign * kPieceAlign;
  for (size_t i = 0; i < lanes; ++i) {
    const size_t offset = std::min(size, piece * i);
    wire::LanePiece p;
    p.connToken = peerToken_;
    p.fromRank = ctx_.rank();
    p.lane = static_cast<uint32_t>(i);
    p.piece = h.laneWrite;
    p.dataRegion = h.dataRegion;
    p.dataCheck = h.dataCheck;
    p.dataOffset = h.dataOffset + offset;
    p.dataSize = std::min(piece, size - offset);  // the last lanes' may be short or empty
    LaneSend send;
    send.conn = token_;
    send.seq = op.seq;
    p.encode(send.header);
    send.data = src.base + srcOffset + offset;
    send.size = p.dataSize;
    send.eager = p.dataSize < eagerBelow_;
    ++op.lanePieces;
    ctx_.lane(static_cast<int>(i)).send(send);
  }
  sendAm(op, h, nullptr, 0, 0);
}

// ---- the target ------------------------------------------------------------------

bool Connection::acceptLaneWrite(const wire::AmHeader& h, size_t length, const std::string& what) {
  auto bad = [&] { return "bad ucx " + what + " from " + peer_.describe() + ": "; };  // built only for an error
  std::string problem;
  if (length)
    fail(PB_ERR_REMOTE, bad() + "a lane write carries " + std::to_string(length) + " bytes of its own");
  else if (h.laneWrite != laneWritesSeen_ + 1)
    fail(PB_ERR_REMOTE, bad() + "lane write #" + std::to_string(h.laneWrite) + ", expected #" +
                            std::to_string(laneWritesSeen_ + 1));
  else if (h.lanes > laneLanding_.size())
    fail(PB_ERR_REMOTE, bad() + "its pieces travel on " + std::to_string(h.lanes) + " lanes, and rank " +
                            std::to_string(ctx_.rank()) + " opened " + std::to_string(laneLanding_.size()));
  else if (!regionBytes(h.dataRegion, h.dataCheck, h.dataOffset, h.dataSize, &problem))
    fail(PB_ERR_REMOTE, bad() + problem);
  if (failure_) return false;
  ++laneWritesSeen_;
  return true;
}

LanePieceVerdict Connection::acceptLanePiece(const wire::LanePiece& p, size_t length, char** dst) {
  if (failure_) return LanePieceVerdict::Refused;  // nothing more lands on a failed connection
  auto bad = [&] {  // built only for an error: this runs for every piece
    return "bad ucx piece #" + std::to_string(p.piece) + " on lane " + std::to_string(p.lane) + " from " +
           peer_.describe() + ": ";
  };
  std::string problem;
  if (p.fromRank != peer_.rank) {
    fail(PB_ERR_REMOTE, bad() + "it claims to be from rank " + std::to_string(p.fromRank));
  } else if (p.lane >= laneLanding_.size()) {
    fail(PB_ERR_REMOTE, bad() + "rank " + std::to_string(ctx_.rank()) + " opened " +
                            std::to_string(laneLanding_.size()) + " lanes");
  } else {
    LaneLanding& lane = laneLanding_[p.lane];
    if (p.piece <= lane.through || lane.pending.count(p.piece))
      fail(PB_ERR_REMOTE, bad() + "that number arrived before");
    else if (p.piece > lane.through + kMaxPiecesAhead)
      fail(PB_ERR_REMOTE, bad() + "more than " + std::to_string(kMaxPiecesAhead) + " ahead of piece #" +
                              std::to_string(lane.through) + ", the last landed");
    else if (p.dataSize != length)
      fail(PB_ERR_REMOTE, bad() + "its header says " + std::to_string(p.dataSize) + " bytes, it carries " +
                              std::to_string(length));
    else if (length && !(*dst = regionBytes(p.dataRegion, p.dataCheck, p.dataOffset, length, &problem)))
      fail(PB_ERR_REMOTE, bad() + problem);
    if (!failure_) lane.pending[p.piece] = false;
  }
  return failure_ ? LanePieceVerdict::Refused : LanePieceVerdict::Accepted;
}

void Connection::onLaneEvent(int lane, const LaneEvent& e) {
  switch (e.kind) {
    case LaneEvent::Kind::Sent: {
      // ops_ holds every unretired operation, numbered without gaps.
      if (ops_.empty() || e.number < ops_.front().seq || e.number > ops_.back().seq) return;
      Op& op = ops_[e.number - ops_.front().seq];
      if (op.lanePieces) --op.lanePieces;
      if (e.status != UCS_OK)
        fail(PB_ERR_REMOTE, "ucx write #" + std::to_string(e.number) + " to " + peer_.describe() + " failed: " +
                                e.what);
      retire();
      return;
    }
    case LaneEvent::Kind::Landed: {
      LaneLanding& landing = laneLanding_[static_cast<size_t>(lane)];
      auto it = landing.pending.find(e.number);
      if (it == landing.pending.end()) return;
      it->second = true;
      while (!landing.pending.empty() && landing.pending.begin()->first == landing.through + 1 &&
             landing.pending.begin()->second) {
        ++landing.through;
        landing.pending.erase(landing.pending.begin());
      }
      applyLanded();
      return;
    }
    case LaneEvent::Kind::Failed:
      // A peer that closed cleanly also breaks its lanes' endpoints.
      if (!peerClosed()) fail(PB_ERR_REMOTE, e.what + " (the connection to " + peer_.describe() + ")");
      return;
  }
}

// ---- the context's side ----------------------------------------------------------

LanePieceVerdict Context::checkLanePiece(const wire::LanePiece& piece, size_t length, char** dst) {
  std::lock_guard<std::mutex> lock(workerMu_);
  Connection* conn = amTarget(piece.connToken);
  if (!conn) return LanePieceVerdict::Closed;  // a piece still travelling when its connection was freed
  return conn->acceptLanePiece(piece, length, dst);
}

void Context::onLaneEvents(int lane, std::vector<LaneEvent>& events) {
  {
    std::lock_guard<std::mutex> lock(workerMu_);
    for (const LaneEvent& e : events)
      if (Connection* conn = amTarget(e.conn)) conn->onLaneEvent(lane, e);
  }
  notifyLanded();
}

}  // namespace plugboard::ucx
