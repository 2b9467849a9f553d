// src/collectives/device_reduce_float.cu — the reduction kernels of float32 and float64 (device_reduce.cuh).
#include <cstdint>

#include "device_reduce.cuh"

namespace aperture::collectives::detail {

template void launch_reduction<float>(const Launch&, const CollectiveHandle&, const Call&);
template void launch_reduction<double>(const Launch&, const CollectiveHandle&, const Call&);

}  // namespace aperture::collectives::detail
