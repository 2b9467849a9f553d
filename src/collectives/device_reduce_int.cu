// src/collectives/device_reduce_int.cu — the reduction kernels of the integers (device_reduce.cuh).
#include <cstdint>

#include "device_reduce.cuh"

namespace aperture::collectives::detail {

template void launch_reduction<std::int8_t>(const Launch&, const CollectiveHandle&, const Call&);
template void launch_reduction<std::uint8_t>(const Launch&, const CollectiveHandle&, const Call&);
template void launch_reduction<std::int32_t>(const Launch&, const CollectiveHandle&, const Call&);
template void launch_reduction<std::uint32_t>(const Launch&, const CollectiveHandle&, const Call&);
template void launch_reduction<std::int64_t>(const Launch&, const CollectiveHandle&, const Call&);
template void launch_reduction<std::uint64_t>(const Launch&, const CollectiveHandle&, const Call&);

}  // namespace aperture::collectives::detail
