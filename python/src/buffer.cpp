#include "buffer.hpp"

#include <string>

#include "plugboard/error.hpp"

namespace plugboard::python {
namespace {

std::string where(const CallSite& at) {
  return std::string(at.call) + " on rank " + std::to_string(at.rank) + " of " + std::to_string(at.nranks);
}

}  // namespace

void requireSameType(const CallSite& at, const Buffer& send, const Buffer& recv) {
  if (send.type == recv.type) return;
  throw Error(ErrorCode::InvalidUsage, where(at) + ": input is " + dataTypeName(send.type) + " but output is " +
                                           dataTypeName(recv.type));
}

void requireCount(const CallSite& at, const char* which, const Buffer& buf, size_t expected) {
  if (buf.count == expected) return;
  throw Error(ErrorCode::InvalidUsage, where(at) + ": " + which + " has " + std::to_string(buf.count) +
                                           " elements, expected " + std::to_string(expected));
}

void requirePeer(const CallSite& at, const char* what, int peer) {
  if (peer >= 0 && peer < at.nranks) return;
  throw Error(ErrorCode::InvalidUsage, where(at) + ": " + what + " " + std::to_string(peer) +
                                           " is not a rank of this communicator (0-" + std::to_string(at.nranks - 1) +
                                           ")");
}

void requireBlocks(const CallSite& at, const Buffer& buf) {
  if (buf.count % static_cast<size_t>(at.nranks) == 0) return;
  throw Error(ErrorCode::InvalidUsage, where(at) + ": " + std::to_string(buf.count) + " elements do not split into " +
                                           std::to_string(at.nranks) + " equal blocks");
}

}  // namespace plugboard::python
