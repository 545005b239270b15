// What the ib-verbs tests do where this host has no usable RDMA port: skip
// with the reason, unless PB_TEST_IB_VERBS_REQUIRE=1 says a device was made
// for this run (tests/rdma/soft_roce.sh sets it once it added a Soft-RoCE
// device); then the same reason fails the test, so a run meant to use a
// device cannot pass by skipping everything.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace plugboard::test {

/// True when PB_TEST_IB_VERBS_REQUIRE is "1".
inline bool ibVerbsDeviceRequired() {
  const char* v = std::getenv("PB_TEST_IB_VERBS_REQUIRE");
  return v && std::string(v) == "1";
}

/// Returns why, for the caller to skip with when it is not empty; where a
/// device is required, a non-empty why also fails the running test.
inline std::string ibVerbsSkipReason(const std::string& why) {
  if (!why.empty() && ibVerbsDeviceRequired())
    ADD_FAILURE() << "PB_TEST_IB_VERBS_REQUIRE=1 (an RDMA device was made for this run), yet: " << why;
  return why;
}

}  // namespace plugboard::test
