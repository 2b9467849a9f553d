// src/bulk/bulk_device_none.cpp — aperture/bulk.h's GPU side in a build without CUDA: host maps
// are still served (bulk.cpp), a GPU map is refused with the reason.
#include "bulk/bulk_device.h"

#include <string>

#include "aperture/error.h"

namespace aperture::detail {

void bulk_device_transfer(void*, const void*, std::size_t, BulkPath, BulkStream, const char* call) {
  throw Error(ErrorCode::unavailable, std::string(call) +
                                          ": this map's table lives in GPU memory, but aperture was built without "
                                          "CUDA (APERTURE_CUDA=OFF or no nvcc at configure time); rebuild with CUDA");
}

}  // namespace aperture::detail
