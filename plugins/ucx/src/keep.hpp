// Storage UCX may still touch after its owner is gone (requests it has not
// finished, their headers, error handlers' arguments, mapped regions).
#pragma once

#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

namespace plugboard::ucx {

/// Moves `thing` into storage that is never destroyed (no exit-order race
/// with UCX) and never moved again (what UCX points into stays put), and is
/// reachable from a static, so leak checkers see it kept on purpose.
template <class T>
void keepUntilExit(T&& thing) {
  using Kept = std::decay_t<T>;
  static std::mutex mu;
  static auto* kept = new std::vector<std::unique_ptr<Kept>>();
  auto box = std::make_unique<Kept>(std::move(thing));
  std::lock_guard<std::mutex> lock(mu);
  kept->push_back(std::move(box));
}

}  // namespace plugboard::ucx
