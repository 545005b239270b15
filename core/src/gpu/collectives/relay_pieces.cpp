#include "gpu/collectives/relay_pieces.hpp"

#include <algorithm>
#include <string>

#include "plugboard/error.hpp"

namespace plugboard::gpucoll {
namespace {

/// A piece's call: the shape's type, op and root with `count` elements.
RelayCall pieceCall(const RelayCallShape& s, Coll coll, uint64_t count) {
  RelayCall c;
  c.count = count;
  c.type = s.type;
  c.op = s.op;
  c.coll = static_cast<uint32_t>(coll);
  c.root = s.root;
  return c;
}

/// One contiguous row: `bytes` at userOffset in the caller's buffer, areaOffset in the area.
RelayCopy row(uint64_t userOffset, uint64_t areaOffset, uint64_t bytes) {
  return {userOffset, areaOffset, bytes, 1, 0, 0};
}

/// nranks rows of `bytes`: rank r's block of the caller's buffer (blocks of
/// blockBytes, `offset` into each) and the area's block r (blocks of `bytes`).
RelayCopy blockRows(uint64_t offset, uint64_t bytes, uint64_t blockBytes, int nranks) {
  return {offset, 0, bytes, static_cast<uint64_t>(nranks), blockBytes, bytes};
}

/// Pieces of a call on one buffer (allreduce, reduce, broadcast): element
/// ranges in order, each in and out at the area's start.
void wholeBuffer(const RelayCallShape& s, uint64_t per, std::vector<RelayPiece>& out) {
  const uint64_t E = s.elementBytes;
  const bool in = s.coll != Coll::Broadcast || s.rank == s.root;
  const bool back = s.coll != Coll::Reduce || s.rank == s.root;
  for (uint64_t at = 0; at < s.count; at += per) {
    const uint64_t n = std::min(per, s.count - at);
    const RelayCopy rows = row(at * E, 0, n * E);
    out.push_back({pieceCall(s, s.coll, n), in ? rows : RelayCopy{}, back ? rows : RelayCopy{}});
  }
}

/// Pieces of a call on rank blocks (allgather, reducescatter, alltoall):
/// the same element range of every block, the area holding the piece's
/// blocks side by side as the host collective's in-place form wants them.
void rankBlocks(const RelayCallShape& s, uint64_t per, std::vector<RelayPiece>& out) {
  const uint64_t E = s.elementBytes, block = s.count * E;
  const uint64_t mine = static_cast<uint64_t>(s.rank);
  for (uint64_t at = 0; at < s.count; at += per) {
    const uint64_t n = std::min(per, s.count - at), bytes = n * E;
    RelayPiece p{pieceCall(s, s.coll, n), {}, {}};
    switch (s.coll) {
      case Coll::AllGather:  // send holds one block; recv every rank's
        p.in = row(at * E, mine * bytes, bytes);
        p.out = blockRows(at * E, bytes, block, s.nranks);
        break;
      case Coll::ReduceScatter:  // send holds every rank's block; recv one
        p.in = blockRows(at * E, bytes, block, s.nranks);
        p.out = row(at * E, mine * bytes, bytes);
        break;
      default:  // alltoall
        p.in = blockRows(at * E, bytes, block, s.nranks);
        p.out = blockRows(at * E, bytes, block, s.nranks);
        break;
    }
    out.push_back(p);
  }
}

/// Pieces of point-to-point calls: piece k of the sent bytes with piece k
/// of the received ones (either side may have run out), so the two ends
/// of every message cut it alike whichever calls they make for it.
void pointToPoint(const RelayCallShape& s, uint64_t per, std::vector<RelayPiece>& out) {
  const uint64_t E = s.elementBytes;
  const bool sends = s.coll != Coll::Recv, receives = s.coll != Coll::Send;
  const uint64_t sent = sends ? s.count : 0;
  const uint64_t received = s.coll == Coll::SendRecv ? s.recvCount : (receives ? s.count : 0);
  const int sendPeer = s.coll == Coll::Recv ? -1 : s.root;
  const int recvPeer = s.coll == Coll::SendRecv ? s.recvPeer : (s.coll == Coll::Recv ? s.root : -1);
  for (uint64_t at = 0; at < std::max(sent, received); at += per) {
    const uint64_t ns = at < sent ? std::min(per, sent - at) : 0;
    const uint64_t nr = at < received ? std::min(per, received - at) : 0;
    RelayPiece p{pieceCall(s, Coll::SendRecv, ns), {}, {}};
    if (ns && nr) {  // both ways: count and root sent, recvCount and recvPeer received
      p.call.root = sendPeer;
      p.call.recvCount = nr;
      p.call.recvPeer = recvPeer;
    } else if (ns) {
      p.call = pieceCall(s, Coll::Send, ns);
      p.call.root = sendPeer;
    } else {
      p.call = pieceCall(s, Coll::Recv, nr);
      p.call.root = recvPeer;
    }
    if (ns) p.in = row(at * E, 0, ns * E);
    if (nr) p.out = row(at * E, 0, nr * E);
    out.push_back(p);
  }
}

}  // namespace

std::vector<RelayPiece> relayPieces(const RelayCallShape& s, uint64_t areaBytes) {
  const uint64_t E = s.elementBytes ? s.elementBytes : 1;
  const bool blocked = s.coll == Coll::AllGather || s.coll == Coll::ReduceScatter || s.coll == Coll::AllToAll;
  const uint64_t per = areaBytes / (E * (blocked ? static_cast<uint64_t>(s.nranks) : 1));
  if (per == 0)
    throw Error(ErrorCode::Internal, "a host relay area of " + std::to_string(areaBytes) + " bytes holds no piece of " +
                                         collName(static_cast<uint32_t>(s.coll)));
  std::vector<RelayPiece> out;
  switch (s.coll) {
    case Coll::AllReduce:
    case Coll::Reduce:
    case Coll::Broadcast: wholeBuffer(s, per, out); break;
    case Coll::AllGather:
    case Coll::ReduceScatter:
    case Coll::AllToAll: rankBlocks(s, per, out); break;
    case Coll::Send:
    case Coll::Recv:
    case Coll::SendRecv: pointToPoint(s, per, out); break;
    default:
      throw Error(ErrorCode::InvalidUsage,
                  std::string("the host relay does not serve ") + collName(static_cast<uint32_t>(s.coll)));
  }
  return out;
}

}  // namespace plugboard::gpucoll
