// src/collectives/overlapped_gemm_none.cpp — aperture::OverlappedGemm in a build without CUDA
// or without cuBLASLt: the class exists (so code that names it links everywhere) and its
// constructor says why it cannot run.
#include "aperture/collectives/overlapped_gemm.h"

#include "aperture/error.h"

namespace aperture {

struct OverlappedGemm::State {};

OverlappedGemm::OverlappedGemm(Provider&, Team&) {
  throw Error(ErrorCode::unavailable,
              "OverlappedGemm: aperture_collectives was built without CUDA or without cuBLASLt (nvcc and libcublasLt "
              "were not both found at configure time); ag_gemm and gemm_rs need a build with both");
}
OverlappedGemm::~OverlappedGemm() = default;
int OverlappedGemm::rank() const { return 0; }
int OverlappedGemm::size() const { return 1; }
void OverlappedGemm::reserve(std::size_t, std::size_t, std::size_t) {}
void OverlappedGemm::ag_gemm(const void*, const void*, void*, std::size_t, std::size_t, std::size_t, Stream) {}
void OverlappedGemm::gemm_rs(const void*, const void*, void*, std::size_t, std::size_t, std::size_t, Stream) {}
void OverlappedGemm::check(Stream) {}

}  // namespace aperture
