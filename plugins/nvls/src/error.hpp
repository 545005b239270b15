// The one exception type inside the nvls plugin. The ABI adapter
// (transport_cxx.hpp) turns it into the pb_status it carries and keeps its
// text for last_error().
#pragma once

#include <plugboard/transport_cxx.hpp>

#include <string>

namespace plugboard::nvls {

/// A failure with the status the ABI boundary reports for it. what() is a
/// complete sentence naming the group rank, communicator rank and driver
/// call where they are known.
class Error : public transport_cxx::Failure {
 public:
  using Failure::Failure;
};

}  // namespace plugboard::nvls

/// Throws plugboard::nvls::Error(status, message) unless cond holds.
#define NVLS_CHECK(cond, status, message)                               \
  do {                                                                  \
    if (!(cond)) throw ::plugboard::nvls::Error((status), (message));   \
  } while (0)
