// 16-bit float host reductions on the CPU's vector conversions
// (collectives/reduce_vector.hpp) against the scalar conversions of
// plugboard/float16.hpp: the same bits for every result but NaN (NaN for
// NaN), every op, in place and out of place, every tail length.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "collectives/reduce_kernels.hpp"
#include "collectives/reduce_vector.hpp"
#include "plugboard/float16.hpp"

using namespace plugboard;

namespace {

struct Sixteen {
  DataType type;
  float (*toFloat)(uint16_t);
  uint16_t (*fromFloat)(float);
  const char* name;
};
const Sixteen kTypes[] = {{DataType::Float16, halfToFloat, floatToHalf, "half"},
                          {DataType::BFloat16, bfloat16ToFloat, floatToBFloat16, "bfloat16"}};
const ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max, ReduceOp::Avg};

float scalarOp(float a, float b, ReduceOp op) {
  switch (op) {
    case ReduceOp::Prod: return a * b;
    case ReduceOp::Min: return std::min(a, b);
    case ReduceOp::Max: return std::max(a, b);
    default: return a + b;
  }
}

/// Operands: random bits, with the special values (zeros, subnormals, the
/// largest finite, infinities, NaNs, rounding ties) mixed in.
std::vector<uint16_t> operands(size_t n, uint32_t seed, DataType type) {
  const std::vector<uint16_t> special =
      type == DataType::Float16
          ? std::vector<uint16_t>{0x0000, 0x8000, 0x0001, 0x03ff, 0x0400, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00,
                                  0x7d01, 0x3c00, 0x3c01, 0x7bfe}
          : std::vector<uint16_t>{0x0000, 0x8000, 0x0001, 0x007f, 0x0080, 0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc0,
                                  0x7f81, 0x3f80, 0x3f81, 0x4000};
  std::mt19937 rng(seed);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = rng() % 4 == 0 ? special[rng() % special.size()] : static_cast<uint16_t>(rng());
  return v;
}

}  // namespace

TEST(ReduceSixteenBitFloats, VectorResultsMatchTheScalarConversionsBitForBit) {
  for (const Sixteen& t : kTypes)
    for (ReduceOp op : kOps)
      for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(8), size_t(9), size_t(15), size_t(16), size_t(33),
                       size_t(100003)}) {
        SCOPED_TRACE(std::string(t.name) + " op " + std::to_string(static_cast<int>(op)) + " n " + std::to_string(n));
        const auto a = operands(n, 7 + static_cast<uint32_t>(n), t.type), b = operands(n, 99, t.type);
        std::vector<uint16_t> out(n), inPlace = a;
        reduceOutOf(out.data(), a.data(), b.data(), n, t.type, op);
        reduceInto(inPlace.data(), b.data(), n, t.type, op);
        for (size_t i = 0; i < n; ++i) {
          const float want = scalarOp(t.toFloat(a[i]), t.toFloat(b[i]), op);
          if (std::isnan(want)) {
            ASSERT_TRUE(std::isnan(t.toFloat(out[i]))) << "[" << i << "] " << a[i] << ", " << b[i];
            ASSERT_TRUE(std::isnan(t.toFloat(inPlace[i])));
            continue;
          }
          ASSERT_EQ(out[i], t.fromFloat(want)) << "[" << i << "] " << std::hex << a[i] << " op " << b[i];
          ASSERT_EQ(inPlace[i], out[i]) << "[" << i << "] in place";
        }
      }
}

TEST(ReduceSixteenBitFloats, AveragesDivideAsTheScalarConversionsDo) {
  for (const Sixteen& t : kTypes)
    for (int nranks : {2, 3, 7})
      for (size_t n : {size_t(5), size_t(8), size_t(29), size_t(4099)}) {
        SCOPED_TRACE(std::string(t.name) + " by " + std::to_string(nranks) + " n " + std::to_string(n));
        const auto before = operands(n, 3 + static_cast<uint32_t>(n), t.type);
        auto got = before;
        finishAverage(got.data(), n, t.type, ReduceOp::Avg, nranks);
        for (size_t i = 0; i < n; ++i) {
          const float want = t.toFloat(before[i]) / static_cast<float>(nranks);
          if (std::isnan(want)) {
            ASSERT_TRUE(std::isnan(t.toFloat(got[i])));
            continue;
          }
          ASSERT_EQ(got[i], t.fromFloat(want)) << "[" << i << "] " << std::hex << before[i];
        }
      }
}

TEST(ReduceSixteenBitFloats, TheVectorLoopsDoWholeGroupsOfEightWhereTheCpuHasThem) {
  std::vector<uint16_t> x(21, 0x3c00), d(21);
  const size_t half = reduceHalfVector(d.data(), x.data(), x.data(), x.size(), ReduceOp::Sum);
  const size_t bf = reduceBFloat16Vector(d.data(), x.data(), x.data(), x.size(), ReduceOp::Sum);
  EXPECT_TRUE(half == 0 || half == 16) << half;
  EXPECT_TRUE(bf == 0 || bf == 16) << bf;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c")) {
    EXPECT_EQ(half, 16u) << "this CPU has AVX2 and F16C: the vector loop should run";
    EXPECT_EQ(bf, 16u);
  }
#endif
}
