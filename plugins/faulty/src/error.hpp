// The one exception type inside the faulty plugin; the ABI adapter turns it
// into the status it carries and keeps its text for last_error().
#pragma once

#include <plugboard/transport_cxx.hpp>

#include <string>

namespace plugboard::faulty {

/// A failure with the status the ABI boundary reports for it.
class Error : public transport_cxx::Failure {
 public:
  using Failure::Failure;
};

}  // namespace plugboard::faulty

/// Throws plugboard::faulty::Error(status, message) unless cond holds.
#define FAULTY_CHECK(cond, status, message)                                  \
  do {                                                                       \
    if (!(cond)) throw ::plugboard::faulty::Error((status), (message));      \
  } while (0)
