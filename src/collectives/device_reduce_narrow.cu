// src/collectives/device_reduce_narrow.cu — the reduction kernels of the 16- and 8-bit floats
// (device_reduce.cuh).
#include <cstdint>

#include "device_reduce.cuh"

namespace aperture::collectives::detail {

template void launch_reduction<__half>(const Launch&, const CollectiveHandle&, const Call&);
template void launch_reduction<__nv_bfloat16>(const Launch&, const CollectiveHandle&, const Call&);
template void launch_reduction<__nv_fp8_e4m3>(const Launch&, const CollectiveHandle&, const Call&);
template void launch_reduction<__nv_fp8_e5m2>(const Launch&, const CollectiveHandle&, const Call&);

}  // namespace aperture::collectives::detail
