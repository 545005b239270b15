// Choosing a libfabric provider and domain from what fi_getinfo offers,
// following the `provider` and `iface` settings, and the per-provider
// facts (cost, estimates) the plugin reports.
#pragma once

#include <rdma/fabric.h>

#include <string>
#include <vector>

namespace plugboard::libfabric {

/// The default preference order when the provider setting is empty.
extern const std::vector<std::string> kDefaultProviders;

/// A parsed provider setting. FI_PROVIDER syntax: comma-separated names in
/// preference order; a leading '^' excludes every name listed instead. A
/// name without ';' also matches layered providers built on it ("tcp"
/// matches "tcp;ofi_rxm", "verbs" matches "verbs;ofi_rxm"); '=' before a
/// name asks for that exact name only.
struct ProviderSpec {
  bool exclude = false;
  std::vector<std::string> names;
  /// Parses text; throws Error(PB_ERR_INVALID) on an empty name.
  static ProviderSpec parse(const std::string& text);
  /// True when the entry (possibly '='-prefixed) names provider.
  /// exactOnly: ignore the layered-provider rule.
  static bool entryMatches(const std::string& entry, const std::string& provider, bool exactOnly);
};

/// True when domain is selected by iface, NCCL_SOCKET_IFNAME syntax:
/// comma-separated prefixes, '^' excludes, '=' exact; empty selects all.
bool ifaceSelects(const std::string& iface, const std::string& domain);

/// What was chosen, copied out of the fi_info.
struct ProviderChoice {
  std::string name;    ///< fi_fabric_attr.prov_name, e.g. "tcp;ofi_rxm".
  std::string fabric;  ///< fi_fabric_attr.name, e.g. "127.0.0.1/32".
  std::string domain;  ///< fi_domain_attr.name, e.g. "lo".
  /// The part before the first ';' ("tcp" for "tcp;ofi_rxm").
  std::string core() const { return name.substr(0, name.find(';')); }
  /// True when the endpoint can only reach this host (loopback domain or
  /// the shm provider).
  bool hostLocal() const;
  /// can_connect's cost for a reachable peer (see README.md).
  int cost() const;
  /// Estimated bandwidth (GB/s) and one-way latency (us), for properties().
  double bandwidthGbps() const;
  double latencyUs() const;
};

/// The fi_info in list that provider and iface select, or NULL with the
/// reason (naming what list offers) in *why.
const fi_info* chooseInfo(const fi_info* list, const std::string& provider, const std::string& iface,
                          std::string* why);

/// "tcp;ofi_rxm (eth0, lo), sockets (eth0, lo)": every provider in list
/// with its domains, in fi_getinfo's order.
std::string describeOffer(const fi_info* list);

/// The first device of a fabric whose provider beats the ethernet
/// transport (a cost below 100: an entry of /sys/class/infiniband (verbs,
/// efa) or /sys/class/cxi, or /dev/hfi1_* (psm2, opx)), as its path; ""
/// when the host has none, so libfabric could only offer software
/// providers (tcp, sockets, udp). root: a directory standing for "/" (tests).
std::string fabricDevice(const std::string& root = "");

}  // namespace plugboard::libfabric
