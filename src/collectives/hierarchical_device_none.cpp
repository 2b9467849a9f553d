// src/collectives/hierarchical_device_none.cpp — hierarchical_device.cu's and device_fold_nodes.cu's
// functions where CUDA was not built in: nothing makes GPU memory then (the Communicator refuses
// it first).
#include <string>

#include "aperture/error.h"
#include "hierarchical.h"

namespace aperture::collectives::detail {

namespace {
[[noreturn]] void no_cuda(const char* what) {
  throw Error(ErrorCode::unavailable, std::string("Communicator (across nodes): ") + what + " needs CUDA, not built in");
}
}  // namespace

void* device_alloc(std::size_t) { no_cuda("device_alloc"); }
void device_free(void*) {}
void* pinned_alloc(std::size_t) { no_cuda("pinned_alloc"); }
void pinned_free(void*) {}
bool device_stream_idle(void*) { no_cuda("device_stream_idle"); }
bool device_stream_capturing(void*) { return false; }
void device_table(std::int64_t**, const std::int64_t*, std::size_t) { no_cuda("device_table"); }
std::uint64_t* cancel_word_alloc(const std::uint64_t**) { no_cuda("cancel_word_alloc"); }
void cancel_word_free(std::uint64_t*) {}
void device_quiesce() {}
void device_fold_nodes(DataType, ReduceOp, const void*, int, void*, std::size_t, int, void*) {
  no_cuda("device_fold_nodes");
}
void device_prescale(DataType, const void*, void*, std::size_t, int, void*) { no_cuda("device_prescale"); }

}  // namespace aperture::collectives::detail
