// aperture/collectives/detail/float_formats.h — the narrow floats as bits, for code that has no
// CUDA types: the CPU collectives (host.cpp is compiled without nvcc's headers).
//
//     Float16Bits, BFloat16Bits, Float8E4M3Bits, Float8E5M2Bits   one element each, as stored
//     MiniFloat<Bits>::to_float(x), MiniFloat<Bits>::from_float(f)   exact decode; round to
//                                                  nearest, ties to even
//
// from_float follows the conversions NCCL's kernels use: float16 and bfloat16 overflow to
// infinity; the 8-bit formats saturate at their largest finite value (CUDA's __NV_SATFINITE),
// NaN stays NaN. The GPU kernels use the CUDA types and intrinsics, which round the same way.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "aperture/config.h"

namespace aperture::collectives::detail {

struct Float16Bits { std::uint16_t bits; };
struct BFloat16Bits { std::uint16_t bits; };
struct Float8E4M3Bits { std::uint8_t bits; };
struct Float8E5M2Bits { std::uint8_t bits; };

// One format: exponent and fraction widths, whether it has infinities, whether a conversion
// saturates at the largest finite value (else it overflows to infinity), and its NaN.
template <int ExponentBits, int FractionBits, bool HasInfinity, bool Saturates, std::uint32_t LargestFinite,
          std::uint32_t NaN>
struct MiniFloatFormat {
  static constexpr int kExponentBits = ExponentBits;
  static constexpr int kFractionBits = FractionBits;
  static constexpr int kBias = (1 << (ExponentBits - 1)) - 1;
  static constexpr bool kHasInfinity = HasInfinity;
  static constexpr bool kSaturates = Saturates;
  static constexpr std::uint32_t kLargestFinite = LargestFinite;
  static constexpr std::uint32_t kNaN = NaN;
};

template <class Bits>
struct MiniFloat;
template <>
struct MiniFloat<Float16Bits> : MiniFloatFormat<5, 10, true, false, 0x7bff, 0x7e00> {};
template <>
struct MiniFloat<BFloat16Bits> : MiniFloatFormat<8, 7, true, false, 0x7f7f, 0x7fc0> {};
// e4m3fn: exponent 15 with fraction 7 is NaN, the rest of exponent 15 are finite (up to 448).
template <>
struct MiniFloat<Float8E4M3Bits> : MiniFloatFormat<4, 3, false, true, 0x7e, 0x7f> {};
template <>
struct MiniFloat<Float8E5M2Bits> : MiniFloatFormat<5, 2, true, true, 0x7b, 0x7e> {};

template <class Bits, class F = MiniFloat<Bits>>
APERTURE_HD float mini_to_float(Bits x) {
  constexpr int W = 1 + F::kExponentBits + F::kFractionBits;
  const std::uint32_t b = x.bits;
  const bool negative = (b >> (W - 1)) & 1u;
  const std::uint32_t magnitude = b & ((1u << (W - 1)) - 1u);
  const std::uint32_t exponent = magnitude >> F::kFractionBits;
  const std::uint32_t fraction = magnitude & ((1u << F::kFractionBits) - 1u);
  constexpr std::uint32_t kTop = (1u << F::kExponentBits) - 1u;
  float v;
  if (F::kHasInfinity && exponent == kTop) {
    v = fraction == 0 ? INFINITY : NAN;
  } else if (!F::kHasInfinity && magnitude == F::kNaN) {
    v = NAN;
  } else if (exponent == 0) {
    v = std::ldexp(static_cast<float>(fraction), 1 - F::kBias - F::kFractionBits);
  } else {
    v = std::ldexp(static_cast<float>(fraction | (1u << F::kFractionBits)),
                   static_cast<int>(exponent) - F::kBias - F::kFractionBits);
  }
  return negative ? -v : v;
}

template <class Bits, class F = MiniFloat<Bits>>
APERTURE_HD Bits mini_from_float(float f) {
  constexpr int W = 1 + F::kExponentBits + F::kFractionBits;
  std::uint32_t u = 0;
  std::memcpy(&u, &f, sizeof u);
  const std::uint32_t sign = (u >> 31) << (W - 1);
  const std::uint32_t raw_exponent = (u >> 23) & 0xffu;
  const std::uint32_t raw_fraction = u & 0x7fffffu;
  std::uint32_t magnitude = 0;
  const bool nan = raw_exponent == 0xff && raw_fraction != 0;
  if (raw_exponent == 0xff) {  // infinity: above every finite value, resolved below
    magnitude = F::kLargestFinite + 1;
  } else {
    // The significand with its leading one (none for float's subnormals) and its exponent.
    const std::uint32_t significand = raw_exponent == 0 ? raw_fraction : raw_fraction | 0x800000u;
    const int exponent = raw_exponent == 0 ? -126 : static_cast<int>(raw_exponent) - 127;
    const int target = exponent + F::kBias;  // the format's biased exponent; < 1: subnormal
    int shift = 23 - F::kFractionBits + (target < 1 ? 1 - target : 0);
    if (shift > 31) shift = 31;
    std::uint32_t q = significand >> shift;
    const std::uint32_t rest = significand & ((1u << shift) - 1u);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (q & 1u))) ++q;
    // Normal: the leading one of q carries into the exponent field (and a round-up past the
    // largest fraction into the next exponent); subnormal: q is the fraction.
    magnitude = target < 1 ? q : (static_cast<std::uint32_t>(target - 1) << F::kFractionBits) + q;
  }
  // Past the largest finite value (e4m3's next pattern would be its NaN): saturate, or infinity.
  if (magnitude > F::kLargestFinite) magnitude = F::kSaturates ? F::kLargestFinite : F::kLargestFinite + 1;
  if (nan) magnitude = F::kNaN;
  Bits out;
  out.bits = static_cast<decltype(out.bits)>(sign | magnitude);
  return out;
}

}  // namespace aperture::collectives::detail
