// libFuzzer target: what a peer hands the ucx plugin before UCX sees any of
// it: the address blob, a packed remote key, an active-message header and
// a lane piece's header.
// Each decoder must accept or explain, never crash; whatever it accepts
// must encode back to the same bytes (so nothing unchecked reaches UCX).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "round_trip.hpp"
#include "wire.hpp"

using namespace plugboard::ucx::wire;

using plugboard::fuzz::expectRoundTrip;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  AddressBlob blob;
  if (AddressBlob::decode(data, size, &blob).empty()) expectRoundTrip(blob, blob.encodedSize(), data, size);
  PackedRkey key;
  if (PackedRkey::decode(data, size, &key).empty()) expectRoundTrip(key, key.encodedSize(), data, size);
  AmHeader header;
  if (AmHeader::decode(data, size, &header).empty() && size == AmHeader::kSize)
    expectRoundTrip(header, AmHeader::kSize, data, size);
  LanePiece piece;
  if (LanePiece::decode(data, size, &piece).empty()) expectRoundTrip(piece, LanePiece::kSize, data, size);
  return 0;
}
