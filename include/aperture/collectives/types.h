// aperture/collectives/types.h — what a collective reduces, and how: NCCL's element types and
// reductions, so a caller moving from NCCL passes what it passed there.
//
//   ReduceOp   sum, min, max, prod, avg
//   DataType   int8, uint8, int32, uint32, int64, uint64, float16, bfloat16, float32, float64,
//              float8_e4m3 (e4m3fn: no infinity, largest 448), float8_e5m2; every type on host
//              memory and on GPUs
//   data_type_of<T>   the DataType of a C++ type (__half, __nv_bfloat16, __nv_fp8_e4m3 and
//              __nv_fp8_e5m2 only under nvcc; the untyped forms take any type on the host)
//   collectives::element_types()   every element type's name, DataType, size and kind, in the
//              table's order (what a binding iterates: the Python package's dtypes)
//
// Reductions combine ranks in rank order 0, 1, ..., world-1 on every rank, so every rank gets
// bit-identical results, and a test can compute the expected value exactly. Each combination
// is rounded to the element type, as NCCL's reductions are (detail/reduce.h says how, per type):
// 16-bit floats combine in float and round to 16 bits at every step, 8-bit floats round to
// float16 and then to 8 bits (saturating at the largest finite value), integers wrap. avg is
// NCCL's: on floats each input times (1 / ranks, rounded to the type), summed; on integers the
// wrapped sum divided by the ranks, rounded towards zero.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include "aperture/collectives/detail/float_formats.h"
#include "aperture/config.h"

#if APERTURE_HAS_CUDA_COMPILER
#  include <cuda_bf16.h>
#  include <cuda_fp16.h>
#  include <cuda_fp8.h>
#endif

// --- The element types: one table ------------------------------------------------------------
// To add an element type, add one row here. Everything else is made from this table: DataType,
// kAllDataTypes, size_of, is_floating, name_of, data_type_of and collectives::element_types()
// below (the Python package's dtypes come from the last), the CPU and GPU dispatch
// (src/collectives/element_types.h) and the per-type files of the reductions, which
// src/collectives/CMakeLists.txt generates from the names of this table's rows. A type with
// arithmetic of its own (a new float format) also needs it taught to detail/reduce.h (and, for
// its bits on the CPU, detail/float_formats.h). Columns:
//   name      the DataType enumerator, and the type's name everywhere (name_of, Python)
//   value     the enumerator's value, fixed once given (a new row takes the next unused: 12)
//   floating  true for floating-point types (avg scales each input; integers divide the sum)
//   cpu_type  how the CPU code holds one element: the narrow floats as their bits
//             (collectives::detail::Float16Bits & co., detail/float_formats.h); names are
//             looked up from namespace aperture
//   cuda_type its CUDA type, named only where nvcc compiles
// The rows' order is kAllDataTypes' (the order tests and bindings list them in).
#define APERTURE_ELEMENT_TYPES(X)                                                                  \
  /* name        value floating cpu_type                                cuda_type */              \
  X(int8,        6,    false,   std::int8_t,                            std::int8_t)               \
  X(uint8,       7,    false,   std::uint8_t,                           std::uint8_t)              \
  X(int32,       2,    false,   std::int32_t,                           std::int32_t)              \
  X(uint32,      8,    false,   std::uint32_t,                          std::uint32_t)             \
  X(int64,       3,    false,   std::int64_t,                           std::int64_t)              \
  X(uint64,      9,    false,   std::uint64_t,                          std::uint64_t)             \
  X(float16,     4,    true,    collectives::detail::Float16Bits,       __half)                    \
  X(bfloat16,    5,    true,    collectives::detail::BFloat16Bits,      __nv_bfloat16)             \
  X(float32,     0,    true,    float,                                  float)                     \
  X(float64,     1,    true,    double,                                 double)                    \
  X(float8_e4m3, 10,   true,    collectives::detail::Float8E4M3Bits,    __nv_fp8_e4m3)             \
  X(float8_e5m2, 11,   true,    collectives::detail::Float8E5M2Bits,    __nv_fp8_e5m2)

namespace aperture {

enum class ReduceOp { sum, min, max, prod, avg };

// NOLINTNEXTLINE(bugprone-macro-parentheses): an enumerator's name cannot be parenthesised
#define APERTURE_ELEMENT_ENUMERATOR(name, value, floating, cpu_type, cuda_type) name = value,
enum class DataType { APERTURE_ELEMENT_TYPES(APERTURE_ELEMENT_ENUMERATOR) };
#undef APERTURE_ELEMENT_ENUMERATOR

// Every DataType and ReduceOp, for code (and tests) that loop over them.
#define APERTURE_ELEMENT_LISTED(name, value, floating, cpu_type, cuda_type) DataType::name,
inline constexpr DataType kAllDataTypes[] = {APERTURE_ELEMENT_TYPES(APERTURE_ELEMENT_LISTED)};
#undef APERTURE_ELEMENT_LISTED
inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg};

namespace collectives {

// One row of the table, as code outside the library (a binding) can iterate it.
struct ElementType {
  const char* name;  // "float16": name_of(type)
  DataType type;
  std::size_t bytes;  // size_of(type)
  bool floating;      // is_floating(type)
};

#define APERTURE_ELEMENT_ROW(name, value, floating, cpu_type, cuda_type) \
  ElementType{#name, DataType::name, sizeof(cpu_type), floating},
inline constexpr ElementType kElementTypes[] = {APERTURE_ELEMENT_TYPES(APERTURE_ELEMENT_ROW)};
#undef APERTURE_ELEMENT_ROW

// Every element type collectives take, in kAllDataTypes' order.
constexpr std::span<const ElementType> element_types() { return kElementTypes; }

}  // namespace collectives

namespace detail {
// The table's row of `t`; null for a value that is no DataType (one cast from elsewhere).
constexpr const collectives::ElementType* find_element_type(DataType t) {
  for (const collectives::ElementType& e : collectives::kElementTypes)
    if (e.type == t) return &e;
  return nullptr;
}
// A new row's value must be one no other row has (a DataType crosses into the library, and into
// Python, as its value).
constexpr bool element_values_distinct() {
  for (const collectives::ElementType& a : collectives::kElementTypes)
    for (const collectives::ElementType& b : collectives::kElementTypes)
      if (&a != &b && a.type == b.type) return false;
  return true;
}
static_assert(element_values_distinct(), "APERTURE_ELEMENT_TYPES: two rows have the same value");
}  // namespace detail

// Bytes of one element; 0 for a value that is no DataType.
constexpr std::size_t size_of(DataType t) {
  const collectives::ElementType* e = detail::find_element_type(t);
  return e != nullptr ? e->bytes : 0;
}
constexpr bool is_floating(DataType t) {
  const collectives::ElementType* e = detail::find_element_type(t);
  return e != nullptr && e->floating;
}
constexpr const char* name_of(DataType t) {
  const collectives::ElementType* e = detail::find_element_type(t);
  return e != nullptr ? e->name : "DataType?";
}
constexpr const char* name_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::min: return "min";
    case ReduceOp::max: return "max";
    case ReduceOp::prod: return "prod";
    default: return "avg";
  }
}

namespace detail {
// The row whose C++ type is T, or -1: the standard types by their CPU type, the narrow floats by
// their CUDA type (under nvcc only; their CPU bits are no type a caller passes).
template <class T>
constexpr int element_row_of() {
  int row = -1;
  int at = 0;
#if APERTURE_HAS_CUDA_COMPILER
#  define APERTURE_ELEMENT_MATCH(name, value, floating, cpu_type, cuda_type) \
    if (std::is_same_v<T, cuda_type>) row = at;                             \
    ++at;
#else
#  define APERTURE_ELEMENT_MATCH(name, value, floating, cpu_type, cuda_type) \
    if (std::is_arithmetic_v<cpu_type> && std::is_same_v<T, cpu_type>) row = at; \
    ++at;
#endif
  APERTURE_ELEMENT_TYPES(APERTURE_ELEMENT_MATCH)
#undef APERTURE_ELEMENT_MATCH
  return row;
}
}  // namespace detail

template <class T>
struct data_type_of;  // no value: not an element type collectives take
template <class T>
  requires(detail::element_row_of<T>() >= 0)
struct data_type_of<T> {
  static constexpr DataType value = kAllDataTypes[detail::element_row_of<T>()];
};
template <class T>
inline constexpr DataType data_type_of_v = data_type_of<T>::value;

}  // namespace aperture
