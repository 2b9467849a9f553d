// bench/python/proxy_put_kernel.cu — the C++ side of bench/python/triton_proxy.py: a put to a peer
// on another node from a CUDA kernel, through aperture::PeerView and the GPU proxy (the same
// queue and proxy thread as the Triton kernel's), timed with CUDA events.
//
// The bench compiles it with nvcc into a shared library and calls it through ctypes, with the
// queue's fields of an aperture.GpuProxy (its `handle`) and the map's device table, so both
// kernels post to one proxy in one process.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "aperture/peer_view.h"

namespace {

// Only tested for null on the device (a view with an engine); the host never calls it here.
void unused_host_call(void*, const aperture::EngineRequest&, void*) {}

__global__ void put_loop(aperture::PeerView peers, unsigned char* dst, const unsigned char* src, std::uint64_t bytes,
                         int peer, int iterations) {
  for (int i = 0; i < iterations; ++i) peers.put(dst, src, bytes, peer);  // each put waits for its completion
}

}  // namespace

// fields: the handle's six int64 (slots, tickets, closed, capacity, timeout_ns, origin). Returns 0
// and the milliseconds of `iterations` puts of `bytes` (one thread) in *ms, or a CUDA error code.
extern "C" int aperture_bench_cpp_proxy_put(const std::int64_t* fields, const std::int64_t* device_table,
                                            std::int64_t local_base, int rank, int world, int peer, void* dst,
                                            const void* src, std::uint64_t bytes, int iterations, float* ms) {
  aperture::PeerView view;
  view.rank = rank;
  view.world_size = world;
  view.peer_bases = device_table;
  view.engine.host_call = &unused_host_call;
  // The engine's offset of a pointer is ptr - peer_bases[rank] + base_offset = ptr - origin.
  view.engine.base_offset = static_cast<std::uint64_t>(local_base - fields[5]);
  view.engine.queue.slots = reinterpret_cast<aperture::ProxySlot*>(fields[0]);
  view.engine.queue.tickets = reinterpret_cast<std::uint64_t*>(fields[1]);
  view.engine.queue.closed = reinterpret_cast<const std::uint32_t*>(fields[2]);
  view.engine.queue.capacity = static_cast<std::uint32_t>(fields[3]);
  view.engine.queue.timeout_ns = static_cast<std::uint64_t>(fields[4]);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start);
  put_loop<<<1, 1>>>(view, static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src), bytes, peer,
                     iterations);
  cudaEventRecord(stop);
  const cudaError_t error = cudaEventSynchronize(stop);
  if (error == cudaSuccess) cudaEventElapsedTime(ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return error == cudaSuccess ? static_cast<int>(cudaGetLastError()) : static_cast<int>(error);
}
