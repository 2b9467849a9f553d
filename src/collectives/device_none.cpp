// src/collectives/device_none.cpp — the GPU entry points of a build without CUDA: each says so.
#include <string>

#include "aperture/error.h"
#include "dispatch.h"

namespace aperture::collectives::detail {

namespace {
[[noreturn]] void no_cuda(const char* what) {
  throw Error(ErrorCode::unavailable, std::string("collectives: ") + what +
              ": aperture_collectives was built without CUDA (no nvcc found at configure time); GPU memory needs a "
              "build with CUDA");
}
}  // namespace

bool device_support_compiled() { return false; }
int device_select(const void*) { no_cuda("device_select"); }
void device_zero(void*, std::uint64_t) { no_cuda("device_zero"); }
void device_launch(const CollectiveHandle&, const Call&, int, int, void*) { no_cuda("device_launch"); }
void device_copy(void*, const void*, std::uint64_t, void*) { no_cuda("device_copy"); }
void device_read_status(const CollectiveHandle&, void*, std::uint64_t*) { no_cuda("device_read_status"); }
void device_synchronize() {}
void device_check_pointer(const char*, const char*, const void*, void*) { no_cuda("device_check_pointer"); }

}  // namespace aperture::collectives::detail
