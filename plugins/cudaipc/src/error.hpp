// The one exception type inside the cudaipc plugin. The ABI adapter
// (transport_cxx.hpp) turns it into the pb_status it carries and stores its
// text for last_error().
#pragma once

#include <plugboard/transport_cxx.hpp>

#include <stdexcept>
#include <string>

namespace plugboard::cudaipc {

/// A failure with the status the ABI boundary reports for it. what() is a
/// complete sentence naming ranks, hosts and GPUs where they are known.
class Error : public transport_cxx::Failure {
 public:
  using Failure::Failure;
};

}  // namespace plugboard::cudaipc

/// Throws plugboard::cudaipc::Error(status, message) unless cond holds.
#define IPC_CHECK(cond, status, message)                                     \
  do {                                                                       \
    if (!(cond)) throw ::plugboard::cudaipc::Error((status), (message));     \
  } while (0)
