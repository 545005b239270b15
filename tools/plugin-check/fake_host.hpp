// The host-services table plugboard-plugin-check hands a plugin in place of
// the core: settings from --set, declarations recorded for the settings
// checks, log lines kept (and echoed with --verbose).
#pragma once

#include <plugboard/transport.h>

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace plugboard::check {

/// One pb_setting_decl_v1 as the plugin declared it (strings copied).
struct DeclaredSetting {
  std::string key;          ///< As given; validated by the settings check.
  int type = 0;             ///< Raw pb_setting_type value.
  std::string defaultValue; ///< "" when the plugin passed NULL.
  bool defaultWasNull = false;
  std::string doc;          ///< "" when the plugin passed NULL.
  int rankLocal = 0;        ///< 0 when the plugin's struct lacks the field.
};

/// This machine's host name (both processes of the checks use it, so the
/// plugin sees a same-host peer).
std::string localHostName();

/// Peer description as the core builds it for setup/can_connect.
struct PeerDescription {
  /// Rank local talking to rank peer; sameHost decides the hosts' names.
  PeerDescription(int local, int peer, bool sameHost);
  std::string localHost;  ///< Storage for info.local_host.
  std::string peerHost;   ///< Storage for info.peer_host.
  pb_peer_info_v1 info{}; ///< What the plugin gets.
};

/// A fake core. Thread-safe, as pb_host_services_v1 requires.
class FakeHost {
 public:
  /// A host for rank of nranks on host hostname; values answer get_setting
  /// for declared keys (defaults answer the rest).
  FakeHost(int rank, int nranks, std::string hostname, std::map<std::string, std::string> values, bool verbose);
  FakeHost(const FakeHost&) = delete;
  FakeHost& operator=(const FakeHost&) = delete;

  /// The table to pass to init().
  const pb_host_services_v1* services() const { return &services_; }
  /// Pretends to be a core of another ABI major (handshake check).
  void setAbiMajor(uint32_t major) { services_.abi_major = major; }
  /// Pretends to be a minor-0 core: struct_size stops before signal_landed.
  void actAsMinor0();

  /// Declarations in the order the plugin made them.
  std::vector<DeclaredSetting> declared() const;
  /// Problems seen while the plugin used the table (duplicate keys,
  /// get_setting for undeclared keys, calls outside struct_size).
  std::vector<std::string> violations() const;
  /// How many times signal_landed was called.
  uint64_t signalsLanded() const { return landed_.load(); }

 private:
  static void log(void* core, pb_log_level level, const char* message);
  static pb_status declare(void* core, const pb_setting_decl_v1* decl);
  static pb_status get(void* core, const char* key, char* buf, size_t len, size_t* needed);
  static void signalLanded(void* core);
  void violation(const std::string& what);

  std::string hostname_;
  std::map<std::string, std::string> values_;
  bool verbose_;
  mutable std::mutex mu_;
  std::vector<DeclaredSetting> declared_;
  std::vector<std::string> violations_;
  std::atomic<uint64_t> landed_{0};
  pb_host_services_v1 services_{};
};

}  // namespace plugboard::check
