// bench/device/bench_device_none.cpp — `aperture bench` in a build without CUDA.
#include "bench.h"

#include "aperture/error.h"

namespace aperture::bench {

std::vector<BenchRow> bench_device(Team&, Provider&, const BenchOptions&) {
  throw Error(ErrorCode::unavailable, "bench: the provider serves GPU memory, but aperture was built without CUDA");
}

}  // namespace aperture::bench
