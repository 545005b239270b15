// libFuzzer target: what a peer (or a setting) hands the ib-verbs plugin
// before libibverbs sees any of it: the address blob, a packed key, and
// the HCA filter's text (ib-verbs.hca, NCCL_IB_HCA syntax). Each must be
// accepted or refused with the plugin's Error, never crash; a blob it
// accepts must encode back to the same bytes (nothing unchecked reaches
// ibv_modify_qp or an RDMA write).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "error.hpp"
#include "hca_filter.hpp"
#include "round_trip.hpp"
#include "wire.hpp"

using namespace plugboard::ibverbs;

using plugboard::fuzz::expectRoundTrip;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const wire::AddressBlob blob = wire::AddressBlob::decode(data, size, "rank 1 (host fuzz)");
    expectRoundTrip(blob, blob.size(), data, size);
  } catch (const Error&) {
  }
  try {
    const wire::PackedKey key = wire::PackedKey::decode(data, size, "rank 1 (host fuzz)");
    expectRoundTrip(key, wire::PackedKey::kSize, data, size);
  } catch (const Error&) {
  }
  try {
    const HcaFilter filter = HcaFilter::parse(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    if (filter.describe().empty()) std::abort();
    (void)filter.matches("mlx5_0", 1);
  } catch (const Error&) {
  }
  return 0;
}
