#include "gpu/switch/multicast_group.hpp"

#include <cstring>
#include <vector>

#include "communicator/communicator_impl.hpp"
#include "plugboard/logger.hpp"

namespace plugboard {
namespace {

bool hasGroupEntries(const pb_transport_v1& t) {
  return PB_HAS_FIELD(&t, pb_transport_v1, group_destroy) && t.group_can_create && t.group_create && t.group_destroy;
}

/// The bootstrap as pb_group_bootstrap_v1 lends it: each call bounded by
/// the bootstrap's own timeout; a failure's text is kept for the error.
struct BootstrapLoan {
  Bootstrap& bootstrap;
  int rank = 0;
  std::string failure;

  static BootstrapLoan& of(void* core) { return *static_cast<BootstrapLoan*>(core); }

  static pb_status allGather(void* core, const void* mine, size_t bytes, void* all) {
    BootstrapLoan& self = of(core);
    return self.guard([&] {
      // memmove: a plugin may pass its own slot of `all` as `mine`.
      if (bytes) std::memmove(static_cast<char*>(all) + static_cast<size_t>(self.rank) * bytes, mine, bytes);
      self.bootstrap.allGather(all, bytes);
    });
  }

  static pb_status barrier(void* core) {
    BootstrapLoan& self = of(core);
    return self.guard([&] { self.bootstrap.barrier(); });
  }

  /// Runs fn; no exception crosses back into the plugin's C frames.
  template <typename Fn>
  pb_status guard(Fn&& fn) noexcept {
    try {
      fn();
      return PB_OK;
    } catch (const Error& e) {
      failure = e.what();
      return e.code() == ErrorCode::Timeout ? PB_ERR_TIMEOUT : PB_ERR_REMOTE;
    } catch (const std::exception& e) {
      failure = e.what();
      return PB_ERR_INTERNAL;
    } catch (...) {
      failure = "unknown exception";
      return PB_ERR_INTERNAL;
    }
  }
};

/// The group as every rank describes it: all of comm's ranks, in order.
struct GroupDesc {
  std::vector<int> ranks;
  pb_group_desc_v1 desc{};

  GroupDesc(Communicator& comm, int device, size_t bytes, const pb_group_bootstrap_v1* loan) {
    for (int r = 0; r < comm.size(); ++r) ranks.push_back(r);
    desc.struct_size = sizeof(desc);
    desc.rank = comm.rank();
    desc.nranks = comm.size();
    desc.comm_ranks = ranks.data();
    desc.cuda_device = device;
    desc.bytes = bytes;
    desc.bootstrap = loan;
  }
};

}  // namespace

TransportPlugin* MulticastGroup::findTransport(Communicator& comm) {
  for (auto& plugin : comm.impl_->plugins)
    if ((plugin->properties().flags & PB_CAP_GROUP) && hasGroupEntries(plugin->api())) return plugin.get();
  return nullptr;
}

std::string MulticastGroup::localRefusal(Communicator& comm, int device, size_t bytes) {
  TransportPlugin* plugin = findTransport(comm);
  if (!plugin)
    return "no group transport loaded (libplugboard-nvls.so: not found on the plugin path, not in `transports`, or "
           "its init failed; plugboard-info says which)";
  GroupDesc g(comm, device, bytes, nullptr);
  int cost = -1;
  char reason[512] = {0};
  const pb_status st = plugin->api().group_can_create(plugin->context(), &g.desc, &cost, reason, sizeof(reason));
  if (st != PB_OK) return plugin->name() + " group_can_create failed: " + plugin->lastError();
  if (cost < 0) return plugin->name() + ": " + (reason[0] ? reason : "refused without a reason");
  return "";
}

MulticastGroup::MulticastGroup(Communicator& comm, TransportPlugin& plugin, int device, size_t bytes)
    : plugin_(plugin) {
  BootstrapLoan loan{comm.bootstrap(), comm.rank(), {}};
  pb_group_bootstrap_v1 lent{sizeof(pb_group_bootstrap_v1), &loan, &BootstrapLoan::allGather, &BootstrapLoan::barrier};
  GroupDesc g(comm, device, bytes, &lent);
  view_.struct_size = sizeof(view_);
  const pb_status st = plugin.api().group_create(plugin.context(), &g.desc, &group_, &view_);
  if (st != PB_OK) {
    std::string why = plugin.lastError();
    if (!loan.failure.empty()) why += " (bootstrap: " + loan.failure + ")";
    throw Error(errorCodeForStatus(st), "rank " + std::to_string(comm.rank()) + " (" + comm.hostOf(comm.rank()) +
                                            "): SwitchChannel: transport " + plugin.name() +
                                            " could not create the group buffer: " + why);
  }
  if (!view_.multicast || !view_.unicast || view_.bytes < bytes) {
    plugin.api().group_destroy(plugin.context(), group_);
    throw Error(ErrorCode::Plugin, "rank " + std::to_string(comm.rank()) + ": SwitchChannel: transport " + plugin.name() +
                                       " returned a group view without mappings or smaller than the " +
                                       std::to_string(bytes) + " bytes asked for");
  }
  PB_LOG(Info, "COLL", "rank " << comm.rank() << ": " << plugin.name() << " group buffer of " << view_.bytes
                                 << " bytes per rank on device " << device);
}

MulticastGroup::~MulticastGroup() {
  if (plugin_.api().group_destroy(plugin_.context(), group_) != PB_OK)
    PB_LOG(Warn, "COLL", plugin_.name() << " group_destroy: " << plugin_.lastError());
}

}  // namespace plugboard
