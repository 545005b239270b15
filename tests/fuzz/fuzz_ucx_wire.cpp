// libFuzzer target: what a peer hands the ucx plugin before UCX sees any of
// it: the address blob, a packed remote key and an active-message header.
// Each decoder must accept or explain, never crash; whatever it accepts
// must encode back to the same bytes (so nothing unchecked reaches UCX).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "wire.hpp"

using namespace plugboard::ucx::wire;

namespace {

/// Aborts (a finding) unless encoding `value` gives back in[0, len).
template <typename T>
void expectRoundTrip(const T& value, size_t encodedSize, const uint8_t* in, size_t len) {
  if (encodedSize != len) std::abort();
  std::vector<uint8_t> out(encodedSize);
  value.encode(out.data());
  if (std::memcmp(out.data(), in, len) != 0) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  AddressBlob blob;
  if (AddressBlob::decode(data, size, &blob).empty()) expectRoundTrip(blob, blob.encodedSize(), data, size);
  PackedRkey key;
  if (PackedRkey::decode(data, size, &key).empty()) expectRoundTrip(key, key.encodedSize(), data, size);
  AmHeader header;
  if (AmHeader::decode(data, size, &header).empty() && size == AmHeader::kSize)
    expectRoundTrip(header, AmHeader::kSize, data, size);
  return 0;
}
