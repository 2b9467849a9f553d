// aperture/collectives/types.h — what a collective reduces, and how.
//
//   ReduceOp   sum, min, max
//   DataType   the element types: float32, float64, int32, int64 (host and GPU), float16 and
//              bfloat16 (GPU: __half, __nv_bfloat16)
//   data_type_of<T>   the DataType of a C++ type (__half and __nv_bfloat16 only under nvcc)
//
// Reductions combine ranks in rank order 0, 1, ..., world-1 on every rank, so every rank gets
// bit-identical results, and a test can compute the expected value exactly. __half and
// __nv_bfloat16 are combined in float and rounded once at the end (detail/reduce.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "aperture/config.h"

#if APERTURE_HAS_CUDA_COMPILER
#  include <cuda_bf16.h>
#  include <cuda_fp16.h>
#endif

namespace aperture {

enum class ReduceOp { sum, min, max };
enum class DataType { float32, float64, int32, int64, float16, bfloat16 };

constexpr std::size_t size_of(DataType t) {
  switch (t) {
    case DataType::float64:
    case DataType::int64: return 8;
    case DataType::float16:
    case DataType::bfloat16: return 2;
    default: return 4;
  }
}
constexpr const char* name_of(DataType t) {
  switch (t) {
    case DataType::float32: return "float32";
    case DataType::float64: return "float64";
    case DataType::int32: return "int32";
    case DataType::int64: return "int64";
    case DataType::float16: return "float16";
    default: return "bfloat16";
  }
}
constexpr const char* name_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::min: return "min";
    default: return "max";
  }
}

template <class T>
struct data_type_of;  // no value: not an element type collectives take
template <>
struct data_type_of<float> { static constexpr DataType value = DataType::float32; };
template <>
struct data_type_of<double> { static constexpr DataType value = DataType::float64; };
template <>
struct data_type_of<std::int32_t> { static constexpr DataType value = DataType::int32; };
template <>
struct data_type_of<std::int64_t> { static constexpr DataType value = DataType::int64; };
#if APERTURE_HAS_CUDA_COMPILER
template <>
struct data_type_of<__half> { static constexpr DataType value = DataType::float16; };
template <>
struct data_type_of<__nv_bfloat16> { static constexpr DataType value = DataType::bfloat16; };
#endif
template <class T>
inline constexpr DataType data_type_of_v = data_type_of<T>::value;

}  // namespace aperture
