// Reading a UCX_TLS list: its items, and whether it lets UCX use TCP.
// Header-only and free of UCX's types, so tests can check the rules.
#pragma once

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

namespace plugboard::ucx {

/// Splits "a,b, c" into its trimmed, non-empty items.
inline std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

/// True when UCX may open its TCP transport under `tls` (UCX_TLS syntax, a
/// leading '^' excludes; empty: UCX's default, every transport). Where it
/// cannot, options meant for TCP make UCX warn at every worker's creation
/// that no transport took them ("invalid configurations").
inline bool tlsMayUseTcp(const std::string& tls) {
  std::vector<std::string> items = splitList(tls);
  if (items.empty()) return true;
  const bool excluding = items[0][0] == '^';
  if (excluding) items[0].erase(0, 1);
  const bool named = std::any_of(items.begin(), items.end(),
                                 [&](const std::string& item) { return item == "tcp" || (!excluding && item == "all"); });
  return excluding ? !named : named;
}

}  // namespace plugboard::ucx
