// libFuzzer target: the staging receiver's check of a landing slot's header
// (checkStagingHeader), which is all that stands between the peer's bytes
// and a GPU copy or counter add at region + offset. The input is the
// 64-byte header, then the expected sequence, the chunk size, a flag and
// the size of the named region (absent when the flag is odd): 89 bytes.
//
// Must hold for every input: the check accepts exactly the headers an
// independent statement of the rule accepts (magic, sequence, a registered
// region, a write of at most a chunk inside it, an aligned 8-byte signal
// inside it, no other operation), and refuses with Error(Remote) starting
// with the caller's `where`.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "communicator/staging_header.hpp"
#include "plugboard/error.hpp"

using namespace plugboard;

namespace {

uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

/// The rule, in 128-bit arithmetic so nothing wraps.
bool shouldAccept(const StagingSlotHeader& h, uint64_t seq, uint64_t chunk, std::optional<uint64_t> region) {
  using u128 = unsigned __int128;
  if (h.magic != kStagingMagic || h.seq != seq || !region) return false;
  if (h.op == kStagedWrite) return h.size <= chunk && u128(h.offset) + h.size <= *region;
  if (h.op == kStagedSignal) return h.offset % 8 == 0 && u128(h.offset) + 8 <= *region;
  return false;
}

[[noreturn]] void die(const char* why) {
  std::fprintf(stderr, "fuzz_staging_header: %s\n", why);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < sizeof(StagingSlotHeader) + 25) return 0;
  StagingSlotHeader h;
  std::memcpy(&h, data, sizeof(h));
  const uint8_t* rest = data + sizeof(h);
  const uint64_t seq = load64(rest), chunk = load64(rest + 8);
  const std::optional<uint64_t> region = rest[16] % 2 ? std::nullopt : std::optional<uint64_t>(load64(rest + 17));
  const std::string where = "rank 0 (host a, ethernet): staged write in landing slot 1";
  bool accepted = true;
  try {
    checkStagingHeader(h, seq, chunk, region, [&] { return where; });
  } catch (const Error& e) {
    accepted = false;
    if (e.code() != ErrorCode::Remote) die("refused with a code other than Remote");
    if (std::string(e.what()).rfind(where, 0) != 0) die("the refusal does not start with where");
  }
  if (accepted != shouldAccept(h, seq, chunk, region)) die(accepted ? "accepted a header the rule refuses" : "refused a header the rule accepts");
  return 0;
}
