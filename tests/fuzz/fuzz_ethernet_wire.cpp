// libFuzzer target: what a peer hands the ethernet plugin: its address
// blob, hello, frame headers, signal extension and packed keys
// (import_rkey). Decoding reads only the fixed sizes; import_rkey must
// accept or throw the plugin's Error, never crash.
#include <cstddef>
#include <cstdint>

#include "error.hpp"
#include "memory.hpp"
#include "wire.hpp"

using namespace plugboard::ethernet;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size >= wire::AddressBlob::kSize) (void)wire::AddressBlob::decode(data);
  if (size >= wire::Hello::kSize) (void)wire::Hello::decode(data);
  if (size >= wire::FrameHeader::kSize) (void)wire::FrameHeader::decode(data);
  if (size >= wire::SignalExt::kSize) (void)wire::SignalExt::decode(data);
  try {
    (void)importRkey(size ? data : nullptr, size);
  } catch (const Error&) {
  }
  return 0;
}
