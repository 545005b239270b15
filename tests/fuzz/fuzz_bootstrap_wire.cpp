// libFuzzer target: the bootstrap's wire messages as a peer or a stranger
// may send them (hello, the root's reply header and address table, the
// point-to-point frame header, the unique id). Decoders must reject or
// accept without reading out of bounds; what they accept must re-encode to
// the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "bootstrap/wire.hpp"

using namespace plugboard::bootstrap;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size >= kHelloBytes) {
    Hello h;
    if (decodeHello(data, h) && std::memcmp(encodeHello(h).data(), data, kHelloBytes) != 0)
      throw std::logic_error("a decoded hello does not re-encode to its bytes");
  }
  if (size >= kReplyHeaderBytes) {
    ReplyHeader r;
    (void)decodeReplyHeader(data, r);
  }
  if (size >= kFrameHeaderBytes) (void)decodeFrameHeader(data);
  std::vector<uint8_t> payload(data, data + size);
  for (int nranks : {0, 1, 2, 3, 7, 64}) {
    std::vector<plugboard::net::SockAddr> table;
    if (decodeAddressTable(payload, nranks, table) && static_cast<int>(table.size()) != nranks)
      throw std::logic_error("decodeAddressTable accepted a table of the wrong size");
  }
  return 0;
}
