// libFuzzer target: what a peer hands the libfabric plugin: the address
// blob (checked decode, which throws the plugin's Error with the sender's
// name), packed keys (lane keys checked against the length), control messages and the WRITE_SIGNAL extension
// (fixed-size reads). Nothing may crash; an accepted address blob must
// encode back to the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "error.hpp"
#include "wire.hpp"

using namespace plugboard::libfabric;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const wire::AddressBlob blob = wire::AddressBlob::decode(data, size, "rank 1 (host fuzz)");
    if (blob.size() != size) std::abort();
    std::vector<uint8_t> out(blob.size());
    blob.encode(out.data());
    // The provider field is NUL-padded and cut at 31 bytes: compare what it carries.
    const size_t p = 24;  // offset of the provider field: magic, version, name_len, rank, addr_format, conn
    if (std::memcmp(out.data(), data, p) != 0 || std::memcmp(out.data() + wire::AddressBlob::kHeaderSize,
                                                             data + wire::AddressBlob::kHeaderSize,
                                                             size - wire::AddressBlob::kHeaderSize) != 0)
      std::abort();
  } catch (const Error&) {
  }
  if (size >= wire::PackedRkey::kHeaderSize) {
    try {
      const wire::PackedRkey key = wire::PackedRkey::decode(data, size);
      if (key.wireSize() != size) std::abort();
    } catch (const Error&) {
    }
  }
  if (size >= wire::Message::kSize) (void)wire::Message::decode(data);
  if (size >= wire::WriteExt::kSize) (void)wire::WriteExt::decode(data);
  return 0;
}
