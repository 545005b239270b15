// The one exception type inside the ethernet plugin. The ABI adapter
// (transport_cxx.hpp) turns it into the pb_status it carries and stores its
// text for last_error().
#pragma once

#include <plugboard/transport_cxx.hpp>

#include <string>

namespace plugboard::ethernet {

/// A failure with the status the ABI boundary reports for it. what() is a
/// complete sentence naming ranks and hosts where they are known.
class Error : public transport_cxx::Failure {
 public:
  using Failure::Failure;
};

}  // namespace plugboard::ethernet

/// Throws plugboard::ethernet::Error(status, message) unless cond holds.
#define ETH_CHECK(cond, status, message)                                         \
  do {                                                                           \
    if (!(cond)) throw ::plugboard::ethernet::Error((status), (message));        \
  } while (0)
