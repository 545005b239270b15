// Which active messages a connection forces eager under ucx.am_eager.
// Header-only and free of UCX's types, so tests can check the rule.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace plugboard::ucx {

/// Messages below this many bytes go eagerly under am_eager = auto over
/// TCP; larger ones may use UCX's rendezvous. Measured on 16 cores
/// (docs/perf/2026-11-27-session24-network-path.md, runs 2-3): UCX's own
/// choice for every size cost 1.1-3x at 64 KiB; rendezvous from 256 KiB
/// only won at 4 MiB at 2-8 ranks and mostly at 1 and 16 MiB (4 ranks,
/// 4 MiB: 4.6-4.7 ms against 6.6-7.7 all eager). On CI's 2 cores (session
/// 36, docs/perf/2026-11-28-session36-notices-and-ucx-rendezvous.md) it
/// won too: 4 ranks 1-4 MiB 1.15-1.3x faster than all eager, 2 ranks
/// 1 MiB 0.6-1.0x the time, 16 MiB the same (an older rule sent
/// everything eagerly there, measured before the plugin's progress thread
/// kept out of a polling caller's way).
inline constexpr size_t kAutoEagerBytes = 256 * 1024;

/// Largest byte count am_eager may name.
inline constexpr uint64_t kMaxEagerBytes = uint64_t(1) << 40;

/// True when `text` is am_eager's byte-count form (decimal digits, at least
/// 2 and at most kMaxEagerBytes; "0" and "1" are the on/off forms), stored
/// in *bytes.
inline bool eagerByteCount(const std::string& text, size_t* bytes) {
  if (text.empty() || text.size() > 13 || text.find_first_not_of("0123456789") != std::string::npos) return false;
  const uint64_t n = std::stoull(text);
  if (n < 2 || n > kMaxEagerBytes) return false;
  *bytes = static_cast<size_t>(n);
  return true;
}

/// Messages shorter than the returned byte count are sent with
/// UCP_AM_SEND_FLAG_EAGER; longer ones are left to UCX (rendezvous above
/// its threshold). `amEager` is the checked setting ("1", "0", "auto" or a
/// byte count: eager below it, wherever UCX runs); `onlyTcp`: UCX's only
/// way between processes is TCP.
inline size_t eagerBelow(const std::string& amEager, bool onlyTcp) {
  size_t bytes = 0;
  if (eagerByteCount(amEager, &bytes)) return bytes;
  if (amEager == "1") return SIZE_MAX;
  if (amEager == "0" || !onlyTcp) return 0;
  return kAutoEagerBytes;
}

}  // namespace plugboard::ucx
