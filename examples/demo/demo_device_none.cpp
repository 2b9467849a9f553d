// examples/demo/demo_device_none.cpp — the demo without CUDA: GPU memory cannot be driven from here.
#include <string>

#include "demo_device.h"

#include "aperture/error.h"

namespace aperture::demo {

DemoRankResult run_on_device(Team&, const PeerView&, const demo::Buffers&) {
  throw Error(
      ErrorCode::unavailable,
      "demo: this provider keeps its memory on the GPU, but this `aperture` was built without CUDA, so the demo "
      "cannot run kernels on it; rebuild with CUDA (nvcc on PATH, -DAPERTURE_CUDA=ON) or run "
      "`aperture demo --provider shm`");
}

}  // namespace aperture::demo
