// src/engines/nvshmem_engine.h — the engine for NVSHMEM's memory (nvshmem builds only): NVSHMEM's
// own host API carries each operation to a PE that nvshmem_ptr does not map (another node, or a
// GPU of this node without P2P), over whatever transport NVSHMEM chose for it.
//
//   put, get      through pinned host staging registered with NVSHMEM (nvshmemx_buffer_register,
//                 so the remote transports may use it as a local buffer), nvshmem_putmem /
//                 nvshmem_getmem, each put completed by nvshmem_quiet before it returns
//   atomics       nvshmem_uintN_atomic_fetch_add / fetch_and / fetch_or / fetch_xor / swap /
//                 compare_swap on the element's bits; min, max and floating add/sub (which
//                 NVSHMEM has no atomic for) as a compare-and-swap loop on the bits
//   signal        nvshmem_quiet (every earlier put has landed), nvshmem_uint64_atomic_set, quiet
//
// Host threads call it (EngineChannel::host_call); a kernel reaches it through aperture's GPU
// proxy (aperture/gpu_proxy.h), whose thread makes the same calls. NVSHMEM's device API is not
// used: that would need libnvshmem_device.a and relocatable device code in aperture.
// Opening and closing involve no other rank.
#pragma once

#include <cstddef>

#include "engines/engine.h"

namespace aperture::detail {

// Covers [local_base, local_base + bytes) of NVSHMEM's symmetric heap, this rank's copy; every
// PE's copy of it is at the same symmetric address. `device`: this rank's GPU, made current on the
// calling thread (the proxy's thread has none of its own).
OpenEngine open_nvshmem_engine(void* local_base, std::size_t bytes, int device);

}  // namespace aperture::detail
