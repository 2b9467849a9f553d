// tools/info_gpu.h — the GPU part of `aperture info`: which GPUs this machine has and which pairs
// can reach each other by load/store (peer access), since that decides which table entries a
// GPU provider can fill.
//
// Built from info_gpu.cpp (CUDA runtime) when aperture is built with CUDA; info_gpu_none.cpp
// otherwise.
#pragma once

namespace aperture::cli {

void print_gpus();

}  // namespace aperture::cli
