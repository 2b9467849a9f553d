// aperture/collectives/types.h — what a collective reduces, and how: NCCL's element types and
// reductions, so a caller moving from NCCL passes what it passed there.
//
//   ReduceOp   sum, min, max, prod, avg
//   DataType   int8, uint8, int32, uint32, int64, uint64, float16, bfloat16, float32, float64,
//              float8_e4m3 (e4m3fn: no infinity, largest 448), float8_e5m2; every type on host
//              memory and on GPUs
//   data_type_of<T>   the DataType of a C++ type (__half, __nv_bfloat16, __nv_fp8_e4m3 and
//              __nv_fp8_e5m2 only under nvcc; the untyped forms take any type on the host)
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

#include "aperture/config.h"

#if APERTURE_HAS_CUDA_COMPILER
#  include <cuda_bf16.h>
#  include <cuda_fp16.h>
#  include <cuda_fp8.h>
#endif

namespace aperture {

enum class ReduceOp { sum, min, max, prod, avg };
// The first six keep their old values; the rest were added with NCCL's other types.
enum class DataType { float32, float64, int32, int64, float16, bfloat16, int8, uint8, uint32, uint64, float8_e4m3, float8_e5m2 };

// Every DataType and ReduceOp, for code (and tests) that loop over them.
inline constexpr DataType kAllDataTypes[] = {DataType::int8,    DataType::uint8,    DataType::int32,      DataType::uint32,
                                             DataType::int64,   DataType::uint64,   DataType::float16,    DataType::bfloat16,
                                             DataType::float32, DataType::float64,  DataType::float8_e4m3, DataType::float8_e5m2};
inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg};

constexpr std::size_t size_of(DataType t) {
  switch (t) {
    case DataType::float64:
    case DataType::int64:
    case DataType::uint64: return 8;
    case DataType::float16:
    case DataType::bfloat16: return 2;
    case DataType::int8:
    case DataType::uint8:
    case DataType::float8_e4m3:
    case DataType::float8_e5m2: return 1;
    default: return 4;
  }
}
constexpr bool is_floating(DataType t) {
  return t == DataType::float32 || t == DataType::float64 || t == DataType::float16 || t == DataType::bfloat16 ||
         t == DataType::float8_e4m3 || t == DataType::float8_e5m2;
}
constexpr const char* name_of(DataType t) {
  switch (t) {
    case DataType::float32: return "float32";
    case DataType::float64: return "float64";
    case DataType::int32: return "int32";
    case DataType::int64: return "int64";
    case DataType::float16: return "float16";
    case DataType::bfloat16: return "bfloat16";
    case DataType::int8: return "int8";
    case DataType::uint8: return "uint8";
    case DataType::uint32: return "uint32";
    case DataType::uint64: return "uint64";
    case DataType::float8_e4m3: return "float8_e4m3";
    default: return "float8_e5m2";
  }
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

template <class T>
struct data_type_of;  // no value: not an element type collectives take
template <>
struct data_type_of<float> { static constexpr DataType value = DataType::float32; };
template <>
struct data_type_of<double> { static constexpr DataType value = DataType::float64; };
template <>
struct data_type_of<std::int8_t> { static constexpr DataType value = DataType::int8; };
template <>
struct data_type_of<std::uint8_t> { static constexpr DataType value = DataType::uint8; };
template <>
struct data_type_of<std::int32_t> { static constexpr DataType value = DataType::int32; };
template <>
struct data_type_of<std::uint32_t> { static constexpr DataType value = DataType::uint32; };
template <>
struct data_type_of<std::int64_t> { static constexpr DataType value = DataType::int64; };
template <>
struct data_type_of<std::uint64_t> { static constexpr DataType value = DataType::uint64; };
#if APERTURE_HAS_CUDA_COMPILER
template <>
struct data_type_of<__half> { static constexpr DataType value = DataType::float16; };
template <>
struct data_type_of<__nv_bfloat16> { static constexpr DataType value = DataType::bfloat16; };
template <>
struct data_type_of<__nv_fp8_e4m3> { static constexpr DataType value = DataType::float8_e4m3; };
template <>
struct data_type_of<__nv_fp8_e5m2> { static constexpr DataType value = DataType::float8_e5m2; };
#endif
template <class T>
inline constexpr DataType data_type_of_v = data_type_of<T>::value;

}  // namespace aperture
