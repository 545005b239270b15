// What a UniqueId holds, and the process-wide registry of root listeners
// opened by TcpBootstrap::createUniqueId.
#pragma once

#include <cstdint>

#include "net/socket.hpp"
#include "plugboard/bootstrap.hpp"

namespace plugboard::bootstrap {

/// The decoded contents of a UniqueId.
struct IdContents {
  uint64_t nonce = 0;      ///< Random job identifier; every hello carries it.
  net::SockAddr root;      ///< Where rank 0 listens.
  bool created = false;    ///< From createUniqueId (listener kept) vs an address.
};

/// Packs contents into the 128 id bytes.
UniqueId encodeId(const IdContents& contents);
/// Unpacks an id; throws Error(InvalidUsage) if the bytes are not one.
IdContents decodeId(const UniqueId& id);

/// Removes and returns the listener createUniqueId opened for nonce in this
/// process (or in the parent this process was forked from); an invalid
/// Socket when there is none.
net::Socket takeRootListener(uint64_t nonce);

}  // namespace plugboard::bootstrap
