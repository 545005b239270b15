// Shared by the tests that drive a transport plugin through the C ABI only
// (no core library): loading the table the way the core does, and a fake of
// the core's host services.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <plugboard/transport.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <map>
#include <utility>
#include <mutex>
#include <string>
#include <vector>

namespace plugboard::test {

/// dlopens path (RTLD_NOW | RTLD_LOCAL) and returns its ABI v1 table, or
/// null after recording a test failure. The handle stays open.
inline const pb_transport_v1* loadPluginTable(const char* path) {
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    ADD_FAILURE() << "dlopen " << path << ": " << dlerror();
    return nullptr;
  }
  auto entry = reinterpret_cast<pb_transport_entry_v1_fn>(dlsym(handle, PB_TRANSPORT_ENTRY_SYMBOL_V1));
  if (!entry) {
    ADD_FAILURE() << "no " << PB_TRANSPORT_ENTRY_SYMBOL_V1 << " in " << path;
    return nullptr;
  }
  return entry(PB_TRANSPORT_ABI_MAJOR, PB_TRANSPORT_ABI_MINOR);
}

/// A stand-in for the core's host services: settings come from a map
/// (standing in for env/YAML), defaults from the plugin's declarations;
/// log lines are kept as "LEVEL message"; signal_landed calls are counted.
struct FakeHost {
  struct Decl {
    pb_setting_type type;
    std::string defaultValue;
    int rankLocal;
  };

  FakeHost(int rank, std::string host, std::map<std::string, std::string> values)
      : hostname(std::move(host)), values(std::move(values)) {
    services.struct_size = sizeof(services);
    services.abi_major = PB_TRANSPORT_ABI_MAJOR;
    services.abi_minor = PB_TRANSPORT_ABI_MINOR;
    services.core = this;
    services.log = &FakeHost::log;
    services.declare_setting = &FakeHost::declare;
    services.get_setting = &FakeHost::get;
    services.rank = rank;
    services.nranks = 2;
    services.hostname = hostname.c_str();
    services.signal_landed = &FakeHost::landed;
  }

  static void log(void* core, pb_log_level level, const char* message) {
    auto* self = static_cast<FakeHost*>(core);
    std::lock_guard<std::mutex> lock(self->mu);
    self->logs.push_back((level == PB_LOG_WARN ? "WARN " : level == PB_LOG_INFO ? "INFO " : "TRACE ") +
                         std::string(message));
  }

  static pb_status declare(void* core, const pb_setting_decl_v1* d) {
    auto* self = static_cast<FakeHost*>(core);
    std::lock_guard<std::mutex> lock(self->mu);
    if (!d || !d->key || self->declared.count(d->key)) return PB_ERR_INVALID;
    self->declared[d->key] = Decl{d->type, d->default_value ? d->default_value : "", d->rank_local};
    return PB_OK;
  }

  static pb_status get(void* core, const char* key, char* buf, size_t len, size_t* needed) {
    auto* self = static_cast<FakeHost*>(core);
    std::lock_guard<std::mutex> lock(self->mu);
    auto decl = self->declared.find(key);
    if (decl == self->declared.end()) return PB_ERR_INVALID;
    auto value = self->values.count(key) ? self->values[key] : decl->second.defaultValue;
    *needed = value.size() + 1;
    if (*needed > len) return PB_ERR_NOMEM;
    std::memcpy(buf, value.c_str(), value.size() + 1);
    return PB_OK;
  }

  static void landed(void* core) { static_cast<FakeHost*>(core)->landings.fetch_add(1); }

  /// True when some log line contains every needle.
  bool logged(std::initializer_list<std::string> needles) {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& line : logs) {
      bool all = true;
      for (const auto& n : needles) all = all && line.find(n) != std::string::npos;
      if (all) return true;
    }
    return false;
  }

  /// Every log line containing needle.
  std::vector<std::string> logsWith(const std::string& needle) {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<std::string> out;
    for (const auto& l : logs)
      if (l.find(needle) != std::string::npos) out.push_back(l);
    return out;
  }

  /// All log lines, one per line, for failure messages.
  std::string allLogs() {
    std::lock_guard<std::mutex> lock(mu);
    std::string out;
    for (const auto& l : logs) out += l + "\n";
    return out;
  }

  std::string hostname;
  std::map<std::string, std::string> values;
  std::map<std::string, Decl> declared;
  std::vector<std::string> logs;
  std::mutex mu;
  std::atomic<int> landings{0};
  pb_host_services_v1 services{};
};

/// Peer description as the core would build it.
struct Peer {
  Peer(int local, int peer, std::string localHost, std::string peerHost)
      : localHost(std::move(localHost)), peerHost(std::move(peerHost)) {
    info.struct_size = sizeof(info);
    info.local_rank = local;
    info.peer_rank = peer;
    info.local_host = this->localHost.c_str();
    info.peer_host = this->peerHost.c_str();
    info.same_host = this->localHost == this->peerHost;
  }
  std::string localHost, peerHost;
  pb_peer_info_v1 info{};
};

/// A byte pattern that differs per seed and per 4 KiB page, so a misplaced
/// or stale block shows in a compare.
inline void fillPattern(uint8_t* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>((i * 131u + seed * 7u + (i >> 12)) & 0xff);
}

/// Why table t cannot make a context here, for a suite's whyUnusable: ""
/// when init as rank 0 of `host` with these settings succeeds (that context
/// is finalized again), "the plugin does not load" without a table, else
/// prefix followed by init's last_error(NULL).
inline std::string initFailure(const pb_transport_v1* t, const std::string& host,
                               std::map<std::string, std::string> settings, const std::string& prefix) {
  if (!t) return "the plugin does not load";
  FakeHost h(0, host, std::move(settings));
  pb_plugin_ctx* ctx = nullptr;
  if (t->init(&h.services, &ctx) != PB_OK) return prefix + t->last_error(nullptr);
  t->finalize(ctx);
  return "";
}

}  // namespace plugboard::test
