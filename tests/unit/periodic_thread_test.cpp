// PeriodicThread (collectives/periodic_thread.hpp): ticks until destroyed,
// stops at the first exception and keeps it, and never makes its owner
// wait out an interval.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "collectives/periodic_thread.hpp"

namespace plugboard {
namespace {

using Clock = std::chrono::steady_clock;

TEST(PeriodicThread, TicksUntilDestroyedWithoutWaitingOutAnInterval) {
  std::atomic<int> calls{0};
  {
    PeriodicThread t("test ticker", std::chrono::milliseconds(2), [&] { ++calls; });
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    while (calls.load() < 5 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_GE(calls.load(), 5);
    EXPECT_TRUE(t.error().empty());
  }
  const int after = calls.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(calls.load(), after) << "ticked after its destruction";

  const auto start = Clock::now();
  { PeriodicThread slow("slow ticker", std::chrono::hours(1), [] {}); }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2)) << "destruction waited for the interval";
}

TEST(PeriodicThread, TheFirstExceptionStopsTheTickingAndIsKept) {
  std::atomic<int> calls{0};
  PeriodicThread t("failing ticker", std::chrono::milliseconds(1), [&] {
    if (++calls == 3) throw std::runtime_error("bootstrap gone");
  });
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (t.error().empty() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(t.error(), "bootstrap gone");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(calls.load(), 3);
  EXPECT_EQ(t.ticks(), 3u);
}

}  // namespace
}  // namespace plugboard
