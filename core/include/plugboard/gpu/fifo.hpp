/// @file fifo.hpp
/// Host side of the GPU -> CPU trigger queue. Single consumer: one thread
/// (the proxy) polls and pops. Requires CUDA; see fifo_device.hpp for the
/// layout and protocol.
#pragma once

#include <cstdint>
#include <memory>

#include "plugboard/gpu/fifo_device.hpp"

namespace plugboard {

/// A multi-producer (GPU threads), single-consumer (host) queue of triggers.
class Fifo {
 public:
  /// Allocates size slots on the current CUDA device. Throws Error(System)
  /// naming the CUDA call that failed; Error(InvalidUsage) for size < 2.
  explicit Fifo(uint32_t size = 512);
  ~Fifo();
  Fifo(const Fifo&) = delete;
  Fifo& operator=(const Fifo&) = delete;

  /// The trigger at the tail if one is ready (valid bit cleared in the
  /// copy returned); otherwise {0, 0} with *ready false.
  ProxyTrigger poll(bool* ready);
  /// Consumes the trigger poll() returned and publishes the new tail to
  /// the producers (a store to mapped host memory; no CUDA call).
  void pop();
  /// Makes every device-side wait on this Fifo give up (push returns
  /// kFifoPushFailed). Used on communicator abort.
  void abort();
  /// The first error a device-side wait recorded (FifoDeviceError), or 0.
  uint32_t deviceError() const;
  /// Triggers popped so far.
  uint64_t tail() const;
  /// Number of slots.
  uint32_t size() const;
  /// Triggers pushed and not yet popped (valid slots; producers still
  /// waiting for room are not counted). Any thread; for diagnostics.
  uint32_t pending() const;
  /// Plain handle for kernels.
  FifoDeviceHandle deviceHandle() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace plugboard
