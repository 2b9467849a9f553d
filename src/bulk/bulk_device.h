// src/bulk/bulk_device.h — the GPU side of aperture/bulk.h: one transfer between two pointers
// already translated, enqueued on a stream. bulk_device.cu with CUDA; bulk_device_none.cpp,
// which refuses, without.
#pragma once

#include <cstddef>

#include "aperture/bulk.h"

namespace aperture::detail {

// Enqueues the copy of `bytes` from `src` to `dst` on `stream` by `path` (copy_engine or
// sm_copy, never automatic); `call` ("bulk_put") names the caller in errors.
void bulk_device_transfer(void* dst, const void* src, std::size_t bytes, BulkPath path, BulkStream stream,
                          const char* call);

}  // namespace aperture::detail
