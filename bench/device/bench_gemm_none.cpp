// bench/device/bench_gemm_none.cpp — the ops ag_gemm and gemm_rs in a bench built without
// cuBLASLt (a trimmed CUDA toolkit): they say so instead of measuring.
#include "aperture/error.h"
#include "device/bench_device.h"

namespace aperture::bench {

std::vector<BenchRow> bench_overlapped_gemm(Team&, Provider&, const BenchOptions&, const std::string& op, cudaStream_t,
                                            void*) {
  throw Error(ErrorCode::unavailable, "bench: op " + op + " needs cuBLASLt, which this build's CUDA toolkit lacks; "
              "rebuild with a full CUDA toolkit");
}

}  // namespace aperture::bench
