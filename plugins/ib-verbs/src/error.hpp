// The one exception type inside the ib-verbs plugin. The ABI adapter
// (transport_cxx.hpp) turns it into the pb_status it carries and keeps its
// text for last_error().
#pragma once

#include <plugboard/transport_cxx.hpp>

#include <string>

namespace plugboard::ibverbs {

/// A failure with the status the ABI boundary reports for it. what() is a
/// complete sentence naming the device, port, rank and host where known.
class Error : public transport_cxx::Failure {
 public:
  using Failure::Failure;
};

}  // namespace plugboard::ibverbs

/// Throws plugboard::ibverbs::Error(status, message) unless cond holds.
#define IBV_CHECK(cond, status, message)                                  \
  do {                                                                    \
    if (!(cond)) throw ::plugboard::ibverbs::Error((status), (message));  \
  } while (0)
