// Staging of CUDA memory over a connection whose transport moves host
// memory only (ethernet, libfabric tcp, ucx tcp). Each side owns a ring of
// pinned send slots and a ring of pinned landing slots the peer writes
// into; the peer's receive thread copies landed chunks to the GPU and
// applies signals in arrival order, so "every write before a signal is
// visible when the signal lands" holds for staged memory too.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace plugboard {

struct ConnectionImpl;
struct RemoteMemoryImpl;

/// One connection's staging engine (both directions).
class Stager {
 public:
  virtual ~Stager() = default;
  /// Copies size bytes from src (device or host memory) to dst+dstOffset
  /// in chunks through the slots, copy and wire overlapping. Returns when
  /// every chunk is posted on the transport (src may then be reused).
  virtual void write(const RemoteMemoryImpl& dst, uint64_t dstOffset, const void* src, uint64_t size) = 0;
  /// Adds value to the 8-byte counter at dst+dstOffset (device or host
  /// memory of the peer) after every earlier staged write has landed there.
  virtual void signal(const RemoteMemoryImpl& dst, uint64_t dstOffset, uint64_t value) = 0;
  /// True once a write went through the peer's landing slots: from then on
  /// every signal on the connection must go through the stager to stay
  /// ordered after those writes.
  virtual bool ordersSignals() const = 0;
  /// Stops the receive thread, waits for queued copies, frees the slots. Idempotent.
  virtual void stop() = 0;
  /// Both directions' progress in one line, for timeout messages (any thread).
  virtual std::string describeState() const = 0;
};

}  // namespace plugboard
