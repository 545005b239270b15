#include "verbs.hpp"

#include <cerrno>
#include <cstring>

#include "error.hpp"

namespace plugboard::ibverbs {

void verbsCheck(int rc, const std::string& what, int status) {
  if (rc == 0) return;
  const int err = rc > 0 ? rc : errno;
  throw Error(static_cast<pb_status>(status), what + " failed: " + (err ? std::strerror(err) : "no reason given") +
                                                  " (returned " + std::to_string(rc) + ", errno " + std::to_string(err) + ")");
}

void verbsNullFailure(const std::string& what, int status) {
  const int err = errno;
  throw Error(static_cast<pb_status>(status), what + " failed: " + (err ? std::strerror(err) : "no reason given") +
                                                   " (errno " + std::to_string(err) + ")");
}

}  // namespace plugboard::ibverbs
