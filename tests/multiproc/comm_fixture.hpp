// Helpers for multi-process communicator tests: a communicator per forked
// rank over loopback, and a check that an error message says what it must.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "plugboard/communicator.hpp"
#include "plugboard/error.hpp"

namespace plugboard::test {

/// A loopback bootstrap with a short timeout, for one forked rank.
inline std::shared_ptr<Bootstrap> loopbackBootstrap(int rank, int nranks, const UniqueId& id,
                                                    std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  return std::make_shared<TcpBootstrap>(rank, nranks, id, timeout, "lo");
}

/// Options with the given YAML text written to a per-process temp file.
inline CommunicatorOptions yamlOptions(const std::string& yaml) {
  std::string path = "/tmp/plugboard-test-" + std::to_string(getpid()) + ".yaml";
  std::ofstream(path) << yaml;
  CommunicatorOptions o;
  o.configPath = path;
  return o;
}

/// Throws unless fn throws an Error of code whose message has every needle.
template <typename Fn>
void requireError(Fn fn, ErrorCode code, const std::vector<std::string>& needles) {
  try {
    fn();
  } catch (const Error& e) {
    std::string m = e.what();
    if (e.code() != code)
      throw std::runtime_error(std::string("wrong error kind ") + errorCodeName(e.code()) + ": " + m);
    for (const auto& n : needles)
      if (m.find(n) == std::string::npos) throw std::runtime_error("error lacks '" + n + "': " + m);
    return;
  }
  throw std::runtime_error("expected an error, got none");
}

}  // namespace plugboard::test
