// Small GPU collectives of a communicator with an unmapped pair, run by the
// host. Through the proxy each call of the GPU pipeline is a cycle of
// kernel -> outbox -> Fifo -> proxy -> network -> landing slot -> kernel
// per step; below gpu_host_relay_bytes the whole call instead goes to a
// host thread that runs the host collective on pinned memory the kernel
// copied the input into, and the kernel copies the result back: one
// kernel launch and one host call per call (docs/design.md "Small GPU
// calls through the host").
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "collectives/relay_server.hpp"
#include "gpu/collectives/relay_words.hpp"
#include "plugboard/communicator.hpp"
#include "plugboard/host_collectives.hpp"

namespace plugboard::gpucoll {

/// The relay of one GpuCollectives: pinned words and data area mapped into
/// the device, the device's call counter, host collectives of its own on
/// the communicator and the thread that serves the calls.
class HostRelay {
 public:
  /// Collective (it sets up host collectives on comm): capacity bytes of
  /// data area (> 0), the same on every rank.
  HostRelay(Communicator& comm, uint64_t capacity);
  /// Stops the thread, then closes the host collectives with the peers
  /// (collective unless aborted). No relayed kernel may still run.
  ~HostRelay();
  HostRelay(const HostRelay&) = delete;
  HostRelay& operator=(const HostRelay&) = delete;

  /// What the relay kernel gets.
  const RelayDevice& device() const { return device_; }
  /// Bytes of the largest relayed call.
  uint64_t capacity() const { return device_.capacity; }
  /// A relayed kernel was enqueued: the thread spins until it is served.
  void expectCall() { server_->expectCall(); }
  /// Throws Error naming this rank when the host side failed or a relayed
  /// kernel's wait ended without its result (timeout, abort); `timeout`
  /// names gpu_wait_timeout in the message.
  void throwIfFailed(const std::string& timeout) const;

 private:
  struct Pinned {
    char* host = nullptr;  // cudaHostAlloc, mapped
    ~Pinned();
  };
  struct DeviceWord {
    uint64_t* ptr = nullptr;  // cudaMalloc
    ~DeviceWord();
  };

  Communicator& comm_;
  Pinned area_;
  DeviceWord calls_;
  RelayDevice device_;
  std::unique_ptr<HostCollectives> host_;
  std::unique_ptr<RelayServer> server_;  // last: stopped first
};

}  // namespace plugboard::gpucoll
