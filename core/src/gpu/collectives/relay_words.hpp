// The words a relayed GPU collective call and the host thread that serves
// it share, in pinned host memory mapped into the device (host_relay.hpp).
// Plain struct, compiled by both g++ and nvcc.
#pragma once

#include <cstdint>

namespace plugboard::gpucoll {

/// One call handed to the host: what to run in place on the data area,
/// laid out as the host collective's in-place form wants it (allgather:
/// this rank's block at rank x count; reducescatter: the result there).
struct RelayCall {
  uint64_t count = 0;  ///< The collective's count (allgather, reducescatter, alltoall: per rank block).
  uint32_t type = 0;   ///< DataType.
  uint32_t op = 0;     ///< ReduceOp (reducing collectives).
  uint32_t coll = 0;   ///< Coll: AllReduce, Reduce, Broadcast, AllGather, ReduceScatter or AllToAll.
  int32_t root = 0;    ///< Reduce and broadcast.
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
/// ended without `done` (SemaphoreDeviceError), with `deviceErrorCall`.
/// Each word sits in its own 64-byte line: the two sides write different ones.
struct alignas(64) RelayWords {
  alignas(64) volatile uint64_t posted;
  RelayCall call;
  alignas(64) volatile uint64_t done;
  alignas(64) volatile uint32_t failed;
  alignas(64) volatile uint32_t deviceError;
  volatile uint64_t deviceErrorCall;
};

/// Where the data area starts in the relay's allocation (16-byte vectors fit).
constexpr uint64_t kRelayDataOffset = 256;
static_assert(sizeof(RelayWords) <= kRelayDataOffset, "relay words overlap the data area");

/// What a relay kernel needs besides its arguments.
struct RelayDevice {
  RelayWords* words = nullptr;  ///< Device alias of the shared words.
  char* data = nullptr;         ///< Device alias of the data area.
  uint64_t capacity = 0;        ///< Bytes of the data area.
  uint64_t* calls = nullptr;    ///< Device memory: calls posted so far.
};

/// Arguments of one relayed call: inBytes of send go to the data area at
/// inOffset, then outBytes from outOffset go to recv (either may be 0).
struct RelayArgs {
  const char* send;
  char* recv;
  uint64_t inBytes, inOffset;
  uint64_t outBytes, outOffset;
  RelayCall call;
};

}  // namespace plugboard::gpucoll
