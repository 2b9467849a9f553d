#include <cstdio>

#include "info_gpu.h"

namespace aperture::cli {

void print_gpus() { std::printf("GPUs: not looked for (aperture was built without CUDA)\n"); }

}  // namespace aperture::cli
