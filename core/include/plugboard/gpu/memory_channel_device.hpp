/// @file memory_channel_device.hpp
/// Device side of a MemoryChannel: direct loads and stores into a peer's
/// buffer mapped into this process (no proxy), plus LL8/LL16 packets whose
/// flags let the reader see data without a separate signal.
#pragma once

#include <cstdint>

#include "plugboard/gpu/semaphore_device.hpp"

namespace plugboard {

/// LL16: 16 bytes carrying 8 payload bytes, each 4-byte half next to a flag.
struct alignas(16) LL16Packet {
  uint32_t data1, flag1, data2, flag2;
};
/// LL8: 8 bytes carrying 4 payload bytes and a flag.
struct alignas(8) LL8Packet {
  uint32_t data, flag;
};

/// Plain struct for kernels (MemoryChannel::deviceHandle()).
struct MemoryChannelDeviceHandle {
  Device2DeviceSemaphoreDeviceHandle semaphore;  ///< Signals to / waits for the peer.
  char* local;                                   ///< This side's registered buffer.
  char* remote;                                  ///< The peer's registered buffer, mapped here.

#if defined(__CUDACC__)
  /// Copies bytes from local+srcOffset to remote+dstOffset, the work split
  /// over threads [0, numThreads) (threadId is this thread's index). Any
  /// alignment: co-aligned spans move in 16/8/4-byte words, the rest in bytes.
  PB_DEVICE_INLINE void put(uint64_t dstOffset, uint64_t srcOffset, uint64_t bytes, uint32_t threadId,
                            uint32_t numThreads) const {
    copy(remote + dstOffset, local + srcOffset, bytes, threadId, numThreads);
  }
  /// Copies bytes from remote+srcOffset to local+dstOffset, cooperatively.
  PB_DEVICE_INLINE void get(uint64_t dstOffset, uint64_t srcOffset, uint64_t bytes, uint32_t threadId,
                            uint32_t numThreads) const {
    copy(local + dstOffset, remote + srcOffset, bytes, threadId, numThreads);
  }
  /// See Device2DeviceSemaphoreDeviceHandle.
  PB_DEVICE_INLINE void signal() const { semaphore.signal(); }
  PB_DEVICE_INLINE bool wait(int64_t timeoutNs = kDefaultWaitTimeoutNs) const { return semaphore.wait(timeoutNs); }

  /// Writes bytes (a multiple of 8) from local+srcOffset into the peer's
  /// packet buffer at remote+dstOffset as LL16 packets stamped with flag.
  PB_DEVICE_INLINE void putPackets16(uint64_t dstOffset, uint64_t srcOffset, uint64_t bytes, uint32_t threadId,
                                     uint32_t numThreads, uint32_t flag) const {
    const uint2* src = reinterpret_cast<const uint2*>(local + srcOffset);
    LL16Packet* dst = reinterpret_cast<LL16Packet*>(remote + dstOffset);
    for (uint64_t i = threadId; i < bytes / 8; i += numThreads) {
      uint2 v = src[i];
      asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(dst + i), "r"(v.x), "r"(flag), "r"(v.y),
                   "r"(flag)
                   : "memory");
    }
  }
  /// Reads LL16 packets from local+srcOffset (written by the peer's
  /// putPackets16) into local+dstOffset, waiting for each packet's flags.
  /// False after waiting timeoutNs for one packet.
  PB_DEVICE_INLINE bool getPackets16(uint64_t dstOffset, uint64_t srcOffset, uint64_t bytes, uint32_t threadId,
                                     uint32_t numThreads, uint32_t flag, int64_t timeoutNs = kDefaultWaitTimeoutNs) const {
    const LL16Packet* src = reinterpret_cast<const LL16Packet*>(local + srcOffset);
    uint2* dst = reinterpret_cast<uint2*>(local + dstOffset);
    for (uint64_t i = threadId; i < bytes / 8; i += numThreads) {
      uint32_t d1, f1, d2, f2;
      WaitClock clock(timeoutNs);
      for (int64_t spins = 0;; ++spins) {
        asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(d1), "=r"(f1), "=r"(d2), "=r"(f2)
                     : "l"(src + i));
        if (f1 == flag && f2 == flag) break;
        if (WaitClock::checkNow(spins) && clock.expired()) return false;
      }
      dst[i] = make_uint2(d1, d2);
    }
    return true;
  }
  /// LL8 variant: 4 payload bytes per 8-byte packet (bytes a multiple of 4).
  PB_DEVICE_INLINE void putPackets8(uint64_t dstOffset, uint64_t srcOffset, uint64_t bytes, uint32_t threadId,
                                    uint32_t numThreads, uint32_t flag) const {
    const uint32_t* src = reinterpret_cast<const uint32_t*>(local + srcOffset);
    LL8Packet* dst = reinterpret_cast<LL8Packet*>(remote + dstOffset);
    for (uint64_t i = threadId; i < bytes / 4; i += numThreads)
      asm volatile("st.volatile.global.v2.u32 [%0], {%1,%2};" ::"l"(dst + i), "r"(src[i]), "r"(flag) : "memory");
  }
  /// LL8 reader; see getPackets16.
  PB_DEVICE_INLINE bool getPackets8(uint64_t dstOffset, uint64_t srcOffset, uint64_t bytes, uint32_t threadId,
                                    uint32_t numThreads, uint32_t flag, int64_t timeoutNs = kDefaultWaitTimeoutNs) const {
    const LL8Packet* src = reinterpret_cast<const LL8Packet*>(local + srcOffset);
    uint32_t* dst = reinterpret_cast<uint32_t*>(local + dstOffset);
    for (uint64_t i = threadId; i < bytes / 4; i += numThreads) {
      uint32_t d, f;
      WaitClock clock(timeoutNs);
      for (int64_t spins = 0;; ++spins) {
        asm volatile("ld.volatile.global.v2.u32 {%0,%1}, [%2];" : "=r"(d), "=r"(f) : "l"(src + i));
        if (f == flag) break;
        if (WaitClock::checkNow(spins) && clock.expired()) return false;
      }
      dst[i] = d;
    }
    return true;
  }

 private:
  /// Cooperative copy: head bytes until both pointers are word-aligned
  /// (when they can be), words of the widest common alignment, tail bytes.
  PB_DEVICE_INLINE static void copy(char* dst, const char* src, uint64_t bytes, uint32_t tid, uint32_t n) {
    const uintptr_t d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
    uint32_t word = 16;
    while (word > 1 && (d % word) != (s % word)) word /= 2;
    uint64_t head = (word - d % word) % word;
    if (head > bytes) head = bytes;
    for (uint64_t i = tid; i < head; i += n) dst[i] = src[i];
    const uint64_t words = (bytes - head) / word;
    char* wd = dst + head;
    const char* ws = src + head;
    switch (word) {
      case 16: copyWords<int4>(wd, ws, words, tid, n); break;
      case 8: copyWords<uint2>(wd, ws, words, tid, n); break;
      case 4: copyWords<uint32_t>(wd, ws, words, tid, n); break;
      case 2: copyWords<uint16_t>(wd, ws, words, tid, n); break;
      default: copyWords<uint8_t>(wd, ws, words, tid, n); break;
    }
    const uint64_t done = head + words * word;
    for (uint64_t i = done + tid; i < bytes; i += n) dst[i] = src[i];
  }
  template <typename T>
  PB_DEVICE_INLINE static void copyWords(char* dst, const char* src, uint64_t words, uint32_t tid, uint32_t n) {
    T* d = reinterpret_cast<T*>(dst);
    const T* s = reinterpret_cast<const T*>(src);
    for (uint64_t i = tid; i < words; i += n) d[i] = s[i];
  }
#endif
};

}  // namespace plugboard
