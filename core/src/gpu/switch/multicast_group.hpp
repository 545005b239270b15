// A group buffer made by a group transport (nvls) through the ABI's
// group entries (minor 4), with the communicator's bootstrap lent for the
// plugin's exchanges.
#pragma once

#include <plugboard/transport.h>

#include <string>

#include "plugboard/communicator.hpp"
#include "plugins/transport_plugin.hpp"

namespace plugboard {

/// One rank's part of a created group buffer; group_destroy on destruction.
class MulticastGroup {
 public:
  /// The first loaded plugin with PB_CAP_GROUP and the group entries, or null.
  static TransportPlugin* findTransport(Communicator& comm);
  /// This rank's answer to "can the group transport create a group of every
  /// rank on `device`?": "" for yes, else the reason (no group transport
  /// loaded, or the plugin's own, e.g. "disabled by NCCL_NVLS_ENABLE=0").
  /// Local: creates nothing, exchanges nothing.
  static std::string localRefusal(Communicator& comm, int device, size_t bytes);

  /// Collective over every rank of comm: group_create of `bytes` per rank on
  /// `device`. Throws Error naming this rank, its host and the plugin's
  /// last_error when any rank fails (the plugin makes every rank fail).
  MulticastGroup(Communicator& comm, TransportPlugin& plugin, int device, size_t bytes);
  ~MulticastGroup();
  MulticastGroup(const MulticastGroup&) = delete;
  MulticastGroup& operator=(const MulticastGroup&) = delete;

  /// Where the buffer is mapped here.
  const pb_group_view_v1& view() const { return view_; }

 private:
  TransportPlugin& plugin_;
  pb_group* group_ = nullptr;
  pb_group_view_v1 view_{};
};

}  // namespace plugboard
