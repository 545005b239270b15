// Bootstrap tags the core uses between a pair of ranks, in one
// place so none is taken twice. Tags from 2^29 up are Plugboard's own
// (users' sendMemory and bootstrap messages stay below).
#pragma once

namespace plugboard {

/// Memory descriptors exchanged when the links are built (host_collectives.cpp).
constexpr int kLinkTag = (1 << 29) + 1;
/// A peer's "closing": it has left its last call (host_collectives.cpp).
constexpr int kCloseTag = (1 << 29) + 2;
/// A failure notice sent out of band, where the link could not carry it
/// (failure_notice.cpp).
constexpr int kNoticeTag = (1 << 29) + 3;
/// A GPU collectives' failure notice (communicator/failure_notices.hpp).
constexpr int kGpuNoticeTag = (1 << 29) + 4;
/// A rank's failure notice to the whole communicator
/// (Communicator::reportFailure, communicator/failure_notices.hpp).
constexpr int kRankNoticeTag = (1 << 29) + 5;
/// Failover messages: kFailoverTag + the pair's failover number (peer_link.cpp).
constexpr int kFailoverTag = (1 << 29) + 0x1000;

}  // namespace plugboard
