#include <cuda_runtime_api.h>

#include <cstdio>
#include <string>
#include <vector>

#include "info_gpu.h"

namespace aperture::cli {

void print_gpus() {
  int count = 0;
  if (const cudaError_t error = cudaGetDeviceCount(&count); error != cudaSuccess || count == 0) {
    std::printf("GPUs: none usable here (%s)\n",
                error != cudaSuccess ? cudaGetErrorString(error) : "cudaGetDeviceCount found 0 devices");
    cudaGetLastError();  // clear it: info goes on
    return;
  }
  std::printf("GPUs: %d\n", count);
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, d);
    char bus[32] = {};
    cudaDeviceGetPCIBusId(bus, sizeof bus, d);
    std::printf("  GPU %d  %s  %.0f GiB  sm_%d%d  %s\n", d, prop.name,
                static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0), prop.major, prop.minor, bus);
  }
  // Peer access decides whether a GPU provider can map a peer's memory: a row is the GPU that
  // loads and stores, a column the GPU whose memory it reaches.
  std::printf("peer access (load/store), row reaches column:\n       ");
  for (int d = 0; d < count; ++d) std::printf(" GPU%-2d", d);
  std::printf("\n");
  for (int from = 0; from < count; ++from) {
    std::printf("  GPU%-2d", from);
    for (int to = 0; to < count; ++to) {
      int can = 0;
      if (from != to) cudaDeviceCanAccessPeer(&can, from, to);
      std::printf("  %-4s", from == to ? "-" : (can ? "yes" : "no"));
    }
    std::printf("\n");
  }
  cudaGetLastError();
}

}  // namespace aperture::cli
