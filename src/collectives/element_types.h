// src/collectives/element_types.h — the element types' table (aperture/collectives/types.h,
// APERTURE_ELEMENT_TYPES) as the library's code uses it: the C++ type each runs on, and the one
// switch from a DataType to code compiled for it.
//
//   CpuType<DataType::float16>    Float16Bits: what the CPU code reduces (host.cpp, host_reduce.inc)
//   CudaType<DataType::float16>   __half: what the kernels reduce (device.cu; under nvcc only)
//   visit_element_type(t, f)      f.template operator()<t>(): [&]<DataType D>() { ... }
//   visit_reduce_op(op, f)        the same for a ReduceOp
//   visit_word(bytes, f)          f.template operator()<W>() with W the unsigned word of that size
#pragma once


#include <cstddef>
#include <cstdint>

#include "aperture/collectives/types.h"
#include "aperture/error.h"

namespace aperture::collectives::detail {

template <DataType D>
struct ElementTypes;
#if APERTURE_HAS_CUDA_COMPILER
#  define APERTURE_ELEMENT_TYPES_OF(name, value, floating, cpu_type, cuda_type) \
    template <>                                                                  \
    struct ElementTypes<DataType::name> {                                        \
      using cpu = cpu_type;                                                      \
      using cuda = cuda_type;                                                    \
    };
#else
#  define APERTURE_ELEMENT_TYPES_OF(name, value, floating, cpu_type, cuda_type) \
    template <>                                                                  \
    struct ElementTypes<DataType::name> {                                        \
      using cpu = cpu_type;                                                      \
    };
#endif
APERTURE_ELEMENT_TYPES(APERTURE_ELEMENT_TYPES_OF)
#undef APERTURE_ELEMENT_TYPES_OF

template <DataType D>
using CpuType = typename ElementTypes<D>::cpu;
#if APERTURE_HAS_CUDA_COMPILER
template <DataType D>
using CudaType = typename ElementTypes<D>::cuda;
#endif

// Calls f.template operator()<D>() with D = t; a value that is no DataType is an internal error
// (the Communicator checks what callers pass).
template <class F>
void visit_element_type(DataType t, F&& f) {
  switch (t) {
#define APERTURE_ELEMENT_CASE(name, value, floating, cpu_type, cuda_type) \
  case DataType::name: f.template operator()<DataType::name>(); return;
    APERTURE_ELEMENT_TYPES(APERTURE_ELEMENT_CASE)
#undef APERTURE_ELEMENT_CASE
  }
  throw Error(ErrorCode::internal, "collectives: internal: not a DataType");
}

template <class F>
void visit_reduce_op(ReduceOp op, F&& f) {
  switch (op) {
    case ReduceOp::sum: f.template operator()<ReduceOp::sum>(); return;
    case ReduceOp::prod: f.template operator()<ReduceOp::prod>(); return;
    case ReduceOp::min: f.template operator()<ReduceOp::min>(); return;
    case ReduceOp::max: f.template operator()<ReduceOp::max>(); return;
    case ReduceOp::avg: f.template operator()<ReduceOp::avg>(); return;
  }
  throw Error(ErrorCode::internal, "collectives: internal: not a ReduceOp");
}

// Moving elements depends on their size only: one instantiation per size, the unsigned word of
// `bytes` bytes (1, 2, 4, or 8 for anything else).
template <class F>
void visit_word(std::size_t bytes, F&& f) {
  switch (bytes) {
    case 1: f.template operator()<std::uint8_t>(); return;
    case 2: f.template operator()<std::uint16_t>(); return;
    case 4: f.template operator()<std::uint32_t>(); return;
    default: f.template operator()<std::uint64_t>(); return;
  }
}

}  // namespace aperture::collectives::detail
