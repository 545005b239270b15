// The words a relayed GPU collective call and the host thread that serves
// it share, in pinned host memory mapped into the device (host_relay.hpp).
// Plain struct, compiled by both g++ and nvcc.
#pragma once

#include <cstdint>

#include "plugboard/gpu/device_wait.hpp"  // PB_HOST_DEVICE_INLINE

namespace plugboard::gpucoll {

/// One call handed to the host: what to run in place on the data area,
/// laid out as the host collective's in-place form wants it (allgather:
/// this rank's block at rank x count; reducescatter: the result there).
struct RelayCall {
  uint64_t count = 0;  ///< The collective's count (allgather, reducescatter, alltoall: per rank block;
                       ///< send, sendrecv: elements sent; recv: received).
  uint32_t type = 0;   ///< DataType.
  uint32_t op = 0;     ///< ReduceOp (reducing collectives).
  uint32_t coll = 0;   ///< Coll: AllReduce, Reduce, Broadcast, AllGather, ReduceScatter, AllToAll,
                       ///< Send, Recv or SendRecv (the last three never as packets).
  int32_t root = 0;    ///< Reduce and broadcast: the root; send, sendrecv: the peer sent to; recv: the peer.
  uint64_t recvCount = 0;  ///< SendRecv: elements received, in place over the sent ones.
  int32_t recvPeer = -1;   ///< SendRecv: the peer received from.
};

/// The relay's shared words, then (at kRelayDataOffset) the data area.
/// Protocol, one call in flight (a communicator's calls are serialized on
/// the device; the kernel ends only once its call is done):
///  - device: writes the data and `call`, fences system-wide, stores
///    `posted` = its call number (1, 2, ...; kept in device memory);
///  - host: sees `posted` one above what it served, reads `call`, runs it
///    in place on the data, stores `done` = that number (release);
///  - device: waits for `done` (or `failed`, the abort flag, its timeout),
///    then copies the result out.
/// `failed` is set once by the host when it can serve no more calls; the
/// reason stays on the host. `deviceError` is set by a kernel whose wait
/// ended without `done` (SemaphoreDeviceError), after `deviceErrorCall`
/// and `deviceErrorColl`.
/// Each word sits in its own 64-byte line: the two sides write different ones.
struct alignas(64) RelayWords {
  alignas(64) volatile uint64_t posted;
  RelayCall call;
  alignas(64) volatile uint64_t done;
  alignas(64) volatile uint32_t failed;
  alignas(64) volatile uint32_t deviceError;
  volatile uint32_t deviceErrorColl;  ///< The call's collective (a packet call writes no `call`).
  volatile uint64_t deviceErrorCall;
};

/// Where the data area starts in the relay's allocation (16-byte vectors fit).
constexpr uint64_t kRelayDataOffset = 256;
static_assert(sizeof(RelayWords) <= kRelayDataOffset, "relay words overlap the data area");

/// Small calls go as packets instead (NCCL's LL idea over PCIe): 8 bytes
/// each, 4 of data and 4 of the call's flag, stored and loaded whole, so a
/// reader that sees the flag sees the data: the device posts with no fence
/// and takes the result in the same reads that find it ready (one PCIe
/// round trip instead of a `done` poll then the copy). A call goes as
/// packets when its input and its result are at most kRelayPacketBytes.
/// In-packets: kRelayHeaderPackets words of the call (relayHeaderWord),
/// then the input's words; out-packets: the result's words, at least one
/// (a call with no result still waits for it, so the next call's packets
/// never overwrite ones the host has not read). The host also stores
/// `done`, as for a posted call.
constexpr uint64_t kRelayPacketBytes = 256;  // where packets measured faster than posting (docs/design.md)
constexpr uint64_t kRelayHeaderPackets = 8;
constexpr uint64_t kRelayInPackets = kRelayHeaderPackets + kRelayPacketBytes / 4;
constexpr uint64_t kRelayOutPackets = kRelayPacketBytes / 4;
/// Bytes of both packet areas, after the data area.
constexpr uint64_t kRelayPacketAreaBytes = 8 * (kRelayInPackets + kRelayOutPackets);

/// Call `seq`'s flag: never 0 (what a packet holds before its first use).
PB_HOST_DEVICE_INLINE uint32_t relayFlag(uint64_t seq) { return static_cast<uint32_t>(seq % 0xffffffffull) + 1; }
/// A packet: data in the low word, flag in the high one.
PB_HOST_DEVICE_INLINE uint64_t relayPacket(uint32_t data, uint32_t flag) {
  return static_cast<uint64_t>(flag) << 32 | data;
}
/// The call's words, as the header packets carry them (every field fits 32
/// bits but the count; the data area is at most 16 MiB).
struct RelayHeader {
  RelayCall call;
  uint32_t inOffset = 0, inBytes = 0, outOffset = 0, outBytes = 0;
  PB_HOST_DEVICE_INLINE uint32_t word(int i) const {
    switch (i) {
      case 0: return static_cast<uint32_t>(call.count);
      case 1: return static_cast<uint32_t>(call.count >> 32);
      case 2: return call.type | call.op << 8 | call.coll << 16;
      case 3: return static_cast<uint32_t>(call.root);
      case 4: return inOffset;
      case 5: return inBytes;
      case 6: return outOffset;
      default: return outBytes;
    }
  }
  /// From the kRelayHeaderPackets words (type, op and coll: a byte each).
  static RelayHeader read(const uint32_t* w) {
    RelayHeader h;
    h.call.count = w[0] | static_cast<uint64_t>(w[1]) << 32;
    h.call.type = w[2] & 0xff;
    h.call.op = w[2] >> 8 & 0xff;
    h.call.coll = w[2] >> 16;
    h.call.root = static_cast<int32_t>(w[3]);
    h.inOffset = w[4];
    h.inBytes = w[5];
    h.outOffset = w[6];
    h.outBytes = w[7];
    return h;
  }
};

/// What a relay kernel needs besides its arguments.
struct RelayDevice {
  RelayWords* words = nullptr;  ///< Device alias of the shared words.
  char* data = nullptr;         ///< Device alias of the data area.
  uint64_t capacity = 0;        ///< Bytes of the data area.
  uint64_t* calls = nullptr;    ///< Device memory: calls posted so far.
  uint64_t* inPackets = nullptr;   ///< Device alias: kRelayInPackets packets (after the data area).
  uint64_t* outPackets = nullptr;  ///< Device alias: kRelayOutPackets packets (after the in-packets).
};

/// Arguments of one relayed call: inBytes of send go to the data area at
/// inOffset, then outBytes from outOffset go to recv (either may be 0).
/// inArea: the data is already there and the result is taken out by the
/// copy engine (a piece, relay_pieces.hpp): the kernel only posts and waits.
struct RelayArgs {
  const char* send;
  char* recv;
  uint64_t inBytes, inOffset;
  uint64_t outBytes, outOffset;
  RelayCall call;
  bool inArea = false;
};

}  // namespace plugboard::gpucoll
