#include "wire.hpp"

#include <plugboard/transport_cxx.hpp>

#include <algorithm>
#include <cstring>

#include "error.hpp"

namespace plugboard::nvls {

using transport_cxx::loadLE;
using transport_cxx::storeLE;

const char* phaseName(Phase phase) {
  switch (phase) {
    case Phase::Agree: return "agreeing on the group set-up";
    case Phase::Granularity: return "querying the granularity";
    case Phase::Create: return "creating and exporting the multicast object";
    case Phase::Join: return "importing the multicast object and adding the device";
    case Phase::Bind: return "allocating and binding memory";
    case Phase::Map: return "mapping the views";
  }
  return "an unknown phase";
}

// Layout: 12 x 32-bit fields (0..47), 3 x 64-bit (48..71), fabric handle
// (72..135), what (136..319).
void Report::pack(uint8_t* out) const {
  std::memset(out, 0, kSize);
  const uint32_t words[12] = {kMagic,
                              kVersion,
                              static_cast<uint32_t>(phase),
                              static_cast<uint32_t>(status),
                              static_cast<uint32_t>(groupRank),
                              static_cast<uint32_t>(nranks),
                              static_cast<uint32_t>(device),
                              handlePreference,
                              fabric,
                              posixFd,
                              pid,
                              static_cast<uint32_t>(fd)};
  for (size_t i = 0; i < 12; ++i) storeLE<uint32_t>(out + 4 * i, words[i]);
  storeLE<uint64_t>(out + 48, bytes);
  storeLE<uint64_t>(out + 56, mcGranularity);
  storeLE<uint64_t>(out + 64, ucGranularity);
  std::memcpy(out + 72, fabricHandle.data(), fabricHandle.size());
  std::memcpy(out + 136, what.data(), std::min(what.size(), kWhatBytes - 1));
}

Report Report::unpack(const uint8_t* in) {
  uint32_t w[12];
  for (size_t i = 0; i < 12; ++i) w[i] = loadLE<uint32_t>(in + 4 * i);
  NVLS_CHECK(w[0] == kMagic, PB_ERR_REMOTE, "nvls: a rank's group set-up record has a wrong magic number");
  NVLS_CHECK(w[1] == kVersion, PB_ERR_REMOTE,
             "nvls: a rank speaks group set-up record version " + std::to_string(w[1]) + ", this one " +
                 std::to_string(kVersion));
  Report r;
  r.phase = static_cast<Phase>(w[2]);
  r.status = static_cast<int32_t>(w[3]);
  r.groupRank = static_cast<int32_t>(w[4]);
  r.nranks = static_cast<int32_t>(w[5]);
  r.device = static_cast<int32_t>(w[6]);
  r.handlePreference = w[7];
  r.fabric = w[8];
  r.posixFd = w[9];
  r.pid = w[10];
  r.fd = static_cast<int32_t>(w[11]);
  r.bytes = loadLE<uint64_t>(in + 48);
  r.mcGranularity = loadLE<uint64_t>(in + 56);
  r.ucGranularity = loadLE<uint64_t>(in + 64);
  std::memcpy(r.fabricHandle.data(), in + 72, r.fabricHandle.size());
  const char* text = reinterpret_cast<const char*>(in + 136);
  r.what.assign(text, strnlen(text, kWhatBytes - 1));
  return r;
}

}  // namespace plugboard::nvls
