// OCP 8-bit floats: decoding of every code, rounding to nearest even,
// saturation, subnormals, and the host reduction of both formats.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "collectives/reduce_kernels.hpp"
#include "plugboard/datatype.hpp"
#include "plugboard/error.hpp"
#include "plugboard/float8.hpp"

using namespace plugboard;

namespace {

uint8_t e4m3(float f) { return floatToFloat8(f, kFloat8E4M3); }
uint8_t e5m2(float f) { return floatToFloat8(f, kFloat8E5M2); }
float fromE4m3(uint8_t b) { return float8ToFloat(b, kFloat8E4M3); }
float fromE5m2(uint8_t b) { return float8ToFloat(b, kFloat8E5M2); }

}  // namespace

TEST(Float8, EveryFiniteCodeRoundTripsAndNaNsStayNaN) {
  for (const Float8Format* f : {&kFloat8E4M3, &kFloat8E5M2}) {
    int nans = 0, infinities = 0;
    for (int code = 0; code < 256; ++code) {
      const uint8_t b = static_cast<uint8_t>(code);
      const float v = float8ToFloat(b, *f);
      if (std::isnan(v)) {
        ++nans;
        EXPECT_TRUE(std::isnan(float8ToFloat(floatToFloat8(v, *f), *f))) << "code " << code;
        continue;
      }
      if (std::isinf(v)) {
        ++infinities;
        continue;
      }
      EXPECT_EQ(floatToFloat8(v, *f), b) << "code " << code << " value " << v;
    }
    EXPECT_EQ(nans, f->hasInfinity ? 6 : 2);
    EXPECT_EQ(infinities, f->hasInfinity ? 2 : 0);
  }
}

TEST(Float8, KnownValues) {
  EXPECT_EQ(fromE4m3(0x7e), 448.0f);
  EXPECT_EQ(fromE4m3(0x38), 1.0f);
  EXPECT_EQ(fromE4m3(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(fromE4m3(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(fromE4m3(0xb8), -1.0f);
  EXPECT_EQ(fromE5m2(0x7b), 57344.0f);
  EXPECT_EQ(fromE5m2(0x3c), 1.0f);
  EXPECT_TRUE(std::isinf(fromE5m2(0x7c)));
  EXPECT_EQ(fromE5m2(0x04), std::ldexp(1.0f, -14));
  EXPECT_EQ(fromE5m2(0x01), std::ldexp(1.0f, -16));
  EXPECT_EQ(e4m3(-0.0f), 0x80);
}

TEST(Float8, RoundsToNearestTiesToEven) {
  EXPECT_EQ(fromE4m3(e4m3(1.0625f)), 1.0f);     // tie between 1 and 1.125: even mantissa
  EXPECT_EQ(fromE4m3(e4m3(1.1875f)), 1.25f);    // tie between 1.125 and 1.25
  EXPECT_EQ(fromE4m3(e4m3(1.07f)), 1.125f);     // above the tie
  EXPECT_EQ(fromE4m3(e4m3(15.5f)), 16.0f);      // carry into the next binade
  EXPECT_EQ(fromE5m2(e5m2(1.125f)), 1.0f);      // tie between 1 and 1.25
  EXPECT_EQ(fromE5m2(e5m2(9.0f)), 8.0f);        // tie between 8 and 10
  EXPECT_EQ(fromE4m3(e4m3(std::ldexp(1.0f, -10))), 0.0f);                    // half the smallest subnormal
  EXPECT_EQ(fromE4m3(e4m3(3 * std::ldexp(1.0f, -10))), std::ldexp(1.0f, -8));  // tie: 1 or 2 quanta -> 2
}

TEST(Float8, SaturatesToTheLargestFiniteValue) {
  EXPECT_EQ(fromE4m3(e4m3(460.0f)), 448.0f);
  EXPECT_EQ(fromE4m3(e4m3(1e9f)), 448.0f);
  EXPECT_EQ(fromE4m3(e4m3(-INFINITY)), -448.0f);
  EXPECT_EQ(fromE5m2(e5m2(1e6f)), 57344.0f);
  EXPECT_EQ(fromE5m2(e5m2(INFINITY)), 57344.0f);
}

TEST(Float8, HostReductionComputesInFloatAndRoundsOnce) {
  for (DataType t : {DataType::Float8E4M3, DataType::Float8E5M2}) {
    const Float8Format& f = t == DataType::Float8E4M3 ? kFloat8E4M3 : kFloat8E5M2;
    std::vector<uint8_t> a, b;
    for (float v : {1.0f, -2.0f, 0.5f, 3.0f}) a.push_back(floatToFloat8(v, f));
    for (float v : {1.0f, 0.5f, -0.25f, -3.0f}) b.push_back(floatToFloat8(v, f));
    std::vector<uint8_t> sum = a, mx = a, prod = a;
    reduceInto(sum.data(), b.data(), a.size(), t, ReduceOp::Sum);
    reduceInto(mx.data(), b.data(), a.size(), t, ReduceOp::Max);
    reduceInto(prod.data(), b.data(), a.size(), t, ReduceOp::Prod);
    const float wantSum[] = {2.0f, -1.5f, 0.25f, 0.0f}, wantMax[] = {1.0f, 0.5f, 0.5f, 3.0f};
    const float wantProd[] = {1.0f, -1.0f, -0.125f, -9.0f};
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(float8ToFloat(sum[i], f), wantSum[i]) << dataTypeName(t) << " sum " << i;
      EXPECT_EQ(float8ToFloat(mx[i], f), wantMax[i]) << dataTypeName(t) << " max " << i;
      // -9 is exact in E4M3; E5M2 rounds it to -8 (tie between 8 and 10).
      const float want = t == DataType::Float8E5M2 && i == 3 ? -8.0f : wantProd[i];
      EXPECT_EQ(float8ToFloat(prod[i], f), want) << dataTypeName(t) << " prod " << i;
    }
    finishAverage(sum.data(), sum.size(), t, ReduceOp::Avg, 2);
    EXPECT_EQ(float8ToFloat(sum[0], f), 1.0f);
    EXPECT_EQ(float8ToFloat(sum[1], f), -0.75f);
  }
}

TEST(Float8, TypeNamesParseAndSizes) {
  EXPECT_EQ(parseDataType("f8e4m3"), DataType::Float8E4M3);
  EXPECT_EQ(parseDataType("fp8e5m2"), DataType::Float8E5M2);
  EXPECT_STREQ(dataTypeName(DataType::Float8E5M2), "f8e5m2");
  EXPECT_EQ(dataTypeSize(DataType::Float8E4M3), 1u);
  EXPECT_THROW(parseDataType("fp8"), Error);
}
