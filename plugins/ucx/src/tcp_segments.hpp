// Where ucx.tcp_segments=auto asks UCX for larger TCP segments.
// Header-only and free of UCX's types, so tests can check the rule.
#pragma once

#include <string>

namespace plugboard::ucx {

/// UCX's TCP segment sizes that tcp_segments=auto asks for (UCX 1.13-1.16
/// defaults: 8 KiB sent, 64 KiB received per segment). Eager messages are
/// copied through these segments; larger ones took the 2-rank 16 MiB host
/// allreduce from 1.97-2.18x to 1.35-1.44x the ethernet plugin's time on 2
/// cores (docs/perf/2026-11-29-session38-doubling-in-place-and-ucx-segments.md).
/// The names are UCX's TCP transport's options (UCX_TCP_TX_SEG_SIZE in the
/// environment): ucp_config_modify hands them to every transport that has
/// them, which is TCP alone.
inline constexpr const char* kAutoTcpSegments[][2] = {{"TX_SEG_SIZE", "64k"}, {"RX_SEG_SIZE", "256k"}};

/// True when UCX may open its TCP transport under `tls` (UCX_TLS syntax;
/// empty: UCX's default, every transport). Where it cannot, UCX warns at
/// every worker's creation that options no transport took ("invalid
/// configurations"), so the segment sizes are asked for only here.
inline bool tlsMayUseTcp(const std::string& tls) {
  const bool excluding = !tls.empty() && tls[0] == '^';
  bool named = false;
  size_t at = excluding ? 1 : 0;
  while (at <= tls.size()) {
    const size_t comma = tls.find(',', at);
    std::string item = tls.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    const size_t first = item.find_first_not_of(" \t"), last = item.find_last_not_of(" \t");
    item = first == std::string::npos ? "" : item.substr(first, last - first + 1);
    if (item == "tcp" || (!excluding && item == "all")) named = true;
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (excluding) return !named;
  return tls.find_first_not_of(" \t,") == std::string::npos || named;
}

}  // namespace plugboard::ucx
