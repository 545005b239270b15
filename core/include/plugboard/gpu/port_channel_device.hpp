/// @file port_channel_device.hpp
/// Device side of a PortChannel: kernels ask the host proxy, through the
/// Fifo, to put/signal/flush over the connection's transport (any transport
/// that can target the peer's buffer). The peer's proxy signals this side's
/// inbound counter; wait() spins on it.
///
/// Trigger encoding (127 usable bits, see fifo_device.hpp):
///   fst: bits 0-31 size, bits 32-63 source offset
///   snd: bits 0-31 destination offset, 32-47 channel id, 48-50 request bits
/// so offsets and sizes are limited to 4 GiB - 1 per request. A signal
/// without a put carries in `size` the count it adds (0 means 1).
#pragma once

#include <cstdint>

#include "plugboard/gpu/fifo_device.hpp"
#include "plugboard/gpu/semaphore_device.hpp"

namespace plugboard {

/// Request bits of a PortChannel trigger.
enum PortRequest : uint64_t { kPortPut = 1, kPortSignal = 2, kPortFlush = 4 };

/// Builds a PortChannel trigger.
PB_HOST_DEVICE_INLINE ProxyTrigger makePortTrigger(uint64_t request, uint32_t channel, uint64_t dstOffset,
                                              uint64_t srcOffset, uint64_t size) {
  return ProxyTrigger{(size & 0xffffffffull) | (srcOffset << 32),
                      (dstOffset & 0xffffffffull) | (static_cast<uint64_t>(channel) << 32) | (request << 48)};
}

/// Fields of a PortChannel trigger, decoded on the host.
struct PortTriggerFields {
  uint64_t request, dstOffset, srcOffset, size;
  uint32_t channel;
};

/// Decodes what makePortTrigger encoded.
inline PortTriggerFields decodePortTrigger(const ProxyTrigger& t) {
  return PortTriggerFields{(t.snd >> 48) & 7, t.snd & 0xffffffffull, t.fst >> 32, t.fst & 0xffffffffull,
                           static_cast<uint32_t>((t.snd >> 32) & 0xffff)};
}

/// Plain struct for kernels (PortChannel::deviceHandle()).
struct PortChannelDeviceHandle {
  FifoDeviceHandle fifo;                         ///< The proxy service's queue.
  Device2DeviceSemaphoreDeviceHandle semaphore;  ///< inbound/expected used by wait(); no remote side.
  uint32_t channel;                              ///< This channel's id in the service.

#if defined(__CUDACC__)
  /// Asks the proxy to write size bytes from local+srcOffset to remote+dstOffset.
  PB_DEVICE_INLINE bool put(uint64_t dstOffset, uint64_t srcOffset, uint64_t size) const {
    return push(kPortPut, dstOffset, srcOffset, size) != kFifoPushFailed;
  }
  /// Asks the proxy to signal the peer (after every earlier put of this
  /// channel), adding count to its counter: count of the peer's waits return.
  PB_DEVICE_INLINE bool signal(uint32_t count = 1) const { return push(kPortSignal, 0, 0, count) != kFifoPushFailed; }
  /// put then signal, as one request.
  PB_DEVICE_INLINE bool putWithSignal(uint64_t dstOffset, uint64_t srcOffset, uint64_t size) const {
    return push(kPortPut | kPortSignal, dstOffset, srcOffset, size) != kFifoPushFailed;
  }
  /// put, signal, then wait until the proxy completed them (the source may be reused).
  PB_DEVICE_INLINE bool putWithSignalAndFlush(uint64_t dstOffset, uint64_t srcOffset, uint64_t size,
                                              int64_t timeoutNs = kDefaultWaitTimeoutNs) const {
    uint64_t pos = push(kPortPut | kPortSignal | kPortFlush, dstOffset, srcOffset, size);
    return pos != kFifoPushFailed && fifo.sync(pos, timeoutNs);
  }
  /// Waits until every earlier request of this channel completed locally.
  PB_DEVICE_INLINE bool flush(int64_t timeoutNs = kDefaultWaitTimeoutNs) const {
    uint64_t pos = push(kPortFlush, 0, 0, 0);
    return pos != kFifoPushFailed && fifo.sync(pos, timeoutNs);
  }
  /// Waits for the peer's next signal.
  PB_DEVICE_INLINE bool wait(int64_t timeoutNs = kDefaultWaitTimeoutNs) const { return semaphore.wait(timeoutNs); }

 private:
  PB_DEVICE_INLINE uint64_t push(uint64_t request, uint64_t dst, uint64_t src, uint64_t size) const {
    return fifo.push(makePortTrigger(request, channel, dst, src, size));
  }
#endif
};

}  // namespace plugboard
