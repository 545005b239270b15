// The nvls transport's decisions at the ABI: a group (switch) transport
// only. Its properties say PB_CAP_GROUP and no memory type; every pair entry
// refuses; the group entries go to entry.hpp. The C glue (guards, NULL
// checks, last_error, the table and the entry symbol) is
// plugboard/transport_cxx.hpp's. Loading the plugin touches no CUDA.
#include <plugboard/transport_cxx.hpp>
#include <unistd.h>

#include <memory>
#include <string>

#include "context.hpp"
#include "entry.hpp"
#include "gate.hpp"
#include "error.hpp"
#include "group.hpp"
#include "handle_kind.hpp"

#ifndef PLUGBOARD_NVLS_VERSION
#define PLUGBOARD_NVLS_VERSION "0.0.0"
#endif

namespace plugboard::nvls {

/// A pair connection, which nvls never makes: the type exists because the
/// adapter's table has pair entries; setup refuses, so none is created.
class NoConnection {
 public:
  /// The context (never called: no NoConnection exists).
  Context& context() { return *context_; }

 private:
  Context* context_ = nullptr;
};

/// Region and key types of the pair entries, never created either.
struct NoRegion {};
struct NoKey {};

/// The reason every pair entry gives.
constexpr const char* kNoPairs = "nvls connects a group of GPUs through a SwitchChannel, not pairs";

/// Throws the refusal of pair entry `op`.
[[noreturn]] void noPairs(const char* op) {
  throw Error(PB_ERR_UNSUPPORTED, std::string("nvls ") + op + ": " + kNoPairs + " (use group_create)");
}

/// The nvls transport for plugboard::transport_cxx::Adapter.
struct Traits {
  using Context = nvls::Context;
  using Connection = NoConnection;
  using Region = NoRegion;
  using RemoteKey = NoKey;
  using Group = MulticastGroup;
  static constexpr const char* kName = "nvls";
  static constexpr const char* kVersion = PLUGBOARD_NVLS_VERSION;

  static Context* init(const pb_host_services_v1* host) { return new Context(host); }

  static void properties(Context&, pb_transport_properties_v1& props) {
    using P = pb_transport_properties_v1;
    // No memory type: nvls registers none (its memory is the group buffer
    // group_create allocates). The core registers a buffer with every
    // transport whose mem_types has the buffer's type, so PB_MEM_CUDA here
    // would make every CUDA registration fail on register_memory's refusal.
    if (PB_HAS_FIELD(&props, P, mem_types)) props.mem_types = 0;
    if (PB_HAS_FIELD(&props, P, flags)) props.flags = PB_CAP_GROUP;
    // NVLink 4 gives a Hopper GPU ~450 GB/s per direction into the
    // NVSwitches, which reduce and multicast in the switch. Unmeasured here.
    if (PB_HAS_FIELD(&props, P, bandwidth_gbps)) props.bandwidth_gbps = 400.0;
    if (PB_HAS_FIELD(&props, P, latency_us)) props.latency_us = 2.0;
    if (PB_HAS_FIELD(&props, P, max_address_size)) props.max_address_size = 0;
    if (PB_HAS_FIELD(&props, P, max_rkey_size)) props.max_rkey_size = 0;
  }

  /// Never a pair; the reason names the gate first when it is closed, so a
  /// user who asked for nvls sees why there is no multicast.
  static int canConnect(Context& c, const pb_peer_info_v1*, std::string* why) {
    const std::string gate = disabledBy(c.settings().enable);
    *why = gate.empty() ? std::string(kNoPairs) : gate + "; and " + kNoPairs;
    return -1;
  }

  static Connection* setup(Context&, const pb_peer_info_v1*, void*, size_t*) { noPairs("setup"); }
  static Region* registerMemory(Context&, void*, size_t, pb_mem_type) { noPairs("register_memory"); }
  static void packRkey(Context&, Region&, void*, size_t*) { noPairs("pack_rkey"); }
  static void deregisterMemory(Context&, Region*) { noPairs("deregister_memory"); }
  static bool connect(Connection&, const void*, size_t) { noPairs("proxy_connect"); }
  static RemoteKey* importRkey(Connection&, const void*, size_t) { noPairs("import_rkey"); }
  static void releaseRkey(Connection*, RemoteKey*) { noPairs("release_rkey"); }
  static void write(Connection&, Region&, size_t, RemoteKey&, size_t, size_t) { noPairs("write"); }
  static void signal(Connection&, RemoteKey&, size_t, uint64_t) { noPairs("signal"); }
  static void progress(Connection&, uint64_t*) { noPairs("proxy_progress"); }
  static void flush(Connection&) { noPairs("flush"); }
  static void freeConnection(Connection*) { noPairs("free"); }

  static void finalize(Context* c) {
    NVLS_CHECK(c->groups() == 0, PB_ERR_INVALID,
               "nvls finalize: " + std::to_string(c->groups()) + " group(s) still alive; group_destroy them first");
    delete c;
  }

  static int groupCanCreate(Context& c, const pb_group_desc_v1* desc, std::string* why) {
    return canCreateGroup(c.driver(), c.settings(), desc, why);
  }

  static Group* groupCreate(Context& c, const pb_group_desc_v1* desc, pb_group_view_v1& view) {
    GroupOptions options;
    options.handlePreference = c.settings().handleType;
    options.pid = static_cast<uint32_t>(getpid());
    std::unique_ptr<Group> group = createGroup(c.driver(), c.settings(), desc, options, view);
    c.log(PB_LOG_INFO, "nvls: " + group->request().describeSelf() + ": multicast group of " +
                           std::to_string(group->request().nranks) + " ranks on device " +
                           std::to_string(group->request().device) + ", " + std::to_string(group->bytes()) +
                           " bytes per rank, " + kindName(group->handleKind()) + " handle");
    c.groupOpened();
    return group.release();
  }

  static void groupDestroy(Context& c, Group* group) {
    std::unique_ptr<Group> owned(group);  // deleted whatever destroy reports
    c.groupClosed();
    owned->destroy();
  }
};

}  // namespace plugboard::nvls

PLUGBOARD_DEFINE_TRANSPORT(plugboard::nvls::Traits);
