// tests/collectives/element_reference.h — what every element type and reduction must give,
// computed without the library's code: the narrow floats by table (every finite value of the
// format decoded from its fields, a value rounded by searching that table for its neighbours),
// arithmetic exact in double and rounded once per step, integers in uint64_t cut to their width.
// It states NCCL's rules (bench/results/2026-12-01-cpu-2core/NOTES.md, "Element types"): each step of the rank-order
// fold is rounded to the element type; the 8-bit floats round through float16 (saturating at
// their largest finite value); avg on floats scales each input by 1/ranks (rounded to the type)
// before summing, on integers divides the wrapped sum, rounding towards zero.
//
// Elements travel as raw bits (uint64_t, the low size_of(type) bytes), so one test loop covers
// every type; shared by the CPU suite (element_types_test.cpp) and the GPU test.
#pragma once

#include <aperture/collectives/types.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace reference {

using aperture::DataType;
using aperture::ReduceOp;

// One narrow float format, its finite non-negative values sorted with their bit patterns.
struct NarrowFormat {
  int exponent_bits, fraction_bits;
  bool has_infinity, saturates;
  std::vector<std::pair<double, std::uint32_t>> finite;  // ascending
  std::vector<double> value_of;                            // by pattern without the sign
  std::uint32_t sign_bit;

  NarrowFormat(int e, int f, bool inf, bool sat) : exponent_bits(e), fraction_bits(f), has_infinity(inf), saturates(sat) {
    sign_bit = 1u << (e + f);
    value_of.assign(sign_bit, NAN);
    const int bias = (1 << (e - 1)) - 1;
    for (std::uint32_t p = 0; p < sign_bit; ++p) {
      const std::uint32_t ef = p >> f, frac = p & ((1u << f) - 1);
      const bool top = ef == (1u << e) - 1;
      if (has_infinity && top) {  // infinity, or a NaN
        value_of[p] = frac == 0 ? INFINITY : NAN;
        continue;
      }
      if (!has_infinity && top && frac == (1u << f) - 1) continue;  // e4m3fn's NaN
      const double v = ef == 0 ? std::ldexp(static_cast<double>(frac), 1 - bias - f)
                               : std::ldexp(1.0 + std::ldexp(static_cast<double>(frac), -f), static_cast<int>(ef) - bias);
      finite.emplace_back(v, p);
      value_of[p] = v;
    }
    std::sort(finite.begin(), finite.end());
  }
  double decode(std::uint32_t p) const {
    const double sign = (p & sign_bit) ? -1.0 : 1.0;
    return sign * value_of[p & (sign_bit - 1)];
  }
  // Nearest finite value, ties to the even pattern; past the largest: infinity or saturation.
  std::uint32_t round(double v) const {
    const std::uint32_t sign = std::signbit(v) ? sign_bit : 0;
    const double a = std::fabs(v);
    const auto& largest = finite.back();
    const double step = largest.first - finite[finite.size() - 2].first;  // the top binade's spacing
    if (a >= largest.first + step / 2 && !saturates) return sign | (((1u << exponent_bits) - 1) << fraction_bits);
    if (a >= largest.first) return sign | largest.second;
    const auto hi = std::lower_bound(finite.begin(), finite.end(), std::make_pair(a, 0u));
    if (hi->first == a) return sign | hi->second;
    const auto lo = hi - 1;
    const double dl = a - lo->first, dh = hi->first - a;
    const auto& pick = dl < dh ? *lo : dh < dl ? *hi : ((lo->second & 1u) == 0 ? *lo : *hi);
    return sign | pick.second;
  }
};

inline const NarrowFormat& float16() { static const NarrowFormat f(5, 10, true, false); return f; }
inline const NarrowFormat& bfloat16() { static const NarrowFormat f(8, 7, true, false); return f; }
inline const NarrowFormat& e4m3() { static const NarrowFormat f(4, 3, false, true); return f; }
inline const NarrowFormat& e5m2() { static const NarrowFormat f(5, 2, true, true); return f; }

inline bool is_narrow(DataType t) {
  return t == DataType::float16 || t == DataType::bfloat16 || t == DataType::float8_e4m3 || t == DataType::float8_e5m2;
}
inline const NarrowFormat& format_of(DataType t) {
  return t == DataType::float16 ? float16() : t == DataType::bfloat16 ? bfloat16() : t == DataType::float8_e4m3 ? e4m3() : e5m2();
}
inline bool is_signed_integer(DataType t) {
  return t == DataType::int8 || t == DataType::int32 || t == DataType::int64;
}
inline int width_bits(DataType t) { return static_cast<int>(aperture::size_of(t)) * 8; }
inline std::uint64_t mask(DataType t) { return width_bits(t) == 64 ? ~0ull : (1ull << width_bits(t)) - 1; }

// Bits <-> value for the floating types.
inline double to_double(DataType t, std::uint64_t bits) {
  if (t == DataType::float32) { float f; const auto b = static_cast<std::uint32_t>(bits); std::memcpy(&f, &b, 4); return f; }
  if (t == DataType::float64) { double d; std::memcpy(&d, &bits, 8); return d; }
  return format_of(t).decode(static_cast<std::uint32_t>(bits));
}
// Rounds an exact value to the type (the 8-bit floats through float16, as NCCL's kernels).
inline std::uint64_t round_to(DataType t, double v) {
  if (t == DataType::float32) { const float f = static_cast<float>(v); std::uint32_t b; std::memcpy(&b, &f, 4); return b; }
  if (t == DataType::float64) { std::uint64_t b; std::memcpy(&b, &v, 8); return b; }
  if (t == DataType::float8_e4m3 || t == DataType::float8_e5m2) v = float16().decode(float16().round(v));
  return format_of(t).round(v);
}
// Integers: the value of `bits` as a signed or unsigned number of the type's width.
inline std::int64_t as_signed(DataType t, std::uint64_t bits) {
  const int w = width_bits(t);
  return w == 64 ? static_cast<std::int64_t>(bits) : static_cast<std::int64_t>(bits << (64 - w)) >> (64 - w);
}

// One step of the fold, a and b of type t, as bits.
inline std::uint64_t combine(DataType t, ReduceOp op, std::uint64_t a, std::uint64_t b) {
  if (!aperture::is_floating(t)) {
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: return (a + b) & mask(t);
      case ReduceOp::prod: return (a * b) & mask(t);
      default: {
        const bool less = is_signed_integer(t) ? as_signed(t, b) < as_signed(t, a) : (b & mask(t)) < (a & mask(t));
        return (op == ReduceOp::min) == less ? b : a;
      }
    }
  }
  const double x = to_double(t, a), y = to_double(t, b);
  if (op == ReduceOp::min) return y < x ? b : a;
  if (op == ReduceOp::max) return x < y ? b : a;
  if (t == DataType::float32) {  // float's own arithmetic, rounded once
    const float r = op == ReduceOp::prod ? static_cast<float>(x) * static_cast<float>(y) : static_cast<float>(x) + static_cast<float>(y);
    return round_to(t, r);
  }
  if (t == DataType::float64) return round_to(t, op == ReduceOp::prod ? x * y : x + y);
  return round_to(t, op == ReduceOp::prod ? x * y : x + y);  // exact in double for 16 and 8 bits
}

// avg on floats: the input times 1/ranks, both of the type, rounded to it.
inline std::uint64_t pre_scale(DataType t, ReduceOp op, std::uint64_t x, int world) {
  if (op != ReduceOp::avg || !aperture::is_floating(t)) return x;
  if (t == DataType::float32) return round_to(t, static_cast<float>(to_double(t, x)) * (1.0f / static_cast<float>(world)));
  const double scale = to_double(t, round_to(t, 1.0 / world));
  return round_to(t, to_double(t, x) * scale);
}

// inputs[r] is rank r's element: the fold over ranks 0 .. world-1.
inline std::uint64_t fold(DataType t, ReduceOp op, const std::vector<std::uint64_t>& inputs) {
  const int world = static_cast<int>(inputs.size());
  std::uint64_t acc = pre_scale(t, op, inputs[0], world);
  for (int r = 1; r < world; ++r) acc = combine(t, op, acc, pre_scale(t, op, inputs[r], world));
  if (op == ReduceOp::avg && !aperture::is_floating(t)) {
    if (is_signed_integer(t)) return static_cast<std::uint64_t>(as_signed(t, acc) / world) & mask(t);
    return (acc & mask(t)) / static_cast<std::uint64_t>(world);
  }
  return acc & mask(t);
}

// A rank's element from 64 random bits: integers use every bit (sums and products wrap);
// floats a value that keeps world <= 8 ranks' sums and products finite, in [-8, 8) (16 and 8
// bits) or [-1, 1), and for prod a magnitude in [0.5, 2).
inline std::uint64_t element(DataType t, ReduceOp op, std::uint64_t random) {
  if (!aperture::is_floating(t)) return random & mask(t);
  const double unit = static_cast<double>(random >> 11) * 0x1.0p-53;  // [0, 1)
  const bool negative = (random & 1u) != 0;
  double v = op == ReduceOp::prod ? 0.5 + 1.5 * unit : (is_narrow(t) ? 8.0 : 1.0) * unit;
  if (negative) v = -v;
  return round_to(t, v);
}

}  // namespace reference
