// src/providers/cuda/cu_check.h — the CUDA driver API, reached without linking libcuda, and its
// errors translated into aperture::Error.
//
// The library links only the CUDA runtime, which opens libcuda itself when it starts: a machine
// with nvcc but no driver (the CI machine) can still load libaperture. The few driver calls a
// provider needs (the virtual memory management of cuda-vmm) are looked up once through
// cudaGetDriverEntryPointByVersion and called through driver_api():
//
//     const auto& cu = driver_api();                                  // throws when there is no driver
//     APERTURE_CU_CHECK(cu.cuMemCreate(&handle, bytes, &prop, 0), "cuda-vmm grow");
//     std::string why = APERTURE_CU_TRY(cu.cuMemMap(va, bytes, 0, handle, 0));  // "" on success
//
// Messages read like common/cuda_check.h's: the call as written (without the "cu." of the table), the
// status name and text from cuGetErrorName/cuGetErrorString, and file:line. As there, the TRY
// form is for steps whose failure every rank must agree on before anyone throws.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <string>
#include <string_view>
#include <type_traits>

#include "aperture/error.h"
#include "common/cuda_check.h"  // call_failure_text, throw_call_failure, cuda_error_text
#include "common/format.h"

namespace aperture::detail {

// The driver entry points aperture uses, each with the signature cuda.h declares for it.
struct DriverApi {
#define APERTURE_DRIVER_ENTRY(name) decltype(&::name) name = nullptr;
#define APERTURE_DRIVER_ENTRIES(X)                                                                           \
  X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGet) X(cuDeviceGetAttribute) X(cuMemGetAllocationGranularity) \
  X(cuMemCreate) X(cuMemRelease) X(cuMemExportToShareableHandle) X(cuMemImportFromShareableHandle)             \
  X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess)
  APERTURE_DRIVER_ENTRIES(APERTURE_DRIVER_ENTRY)
#undef APERTURE_DRIVER_ENTRY

  bool loaded = false;
  std::string why_not;  // when !loaded: which entry point could not be had, and why
};

namespace cu_detail {
// The driver version the entry points are asked for: every one above exists, with this ABI,
// since CUDA 10.2, and CUDA 12.0 is the oldest driver aperture supports.
constexpr unsigned kEntryPointVersion = 12000;

inline DriverApi load_driver_api() {
  DriverApi api;
  const auto load = [&api](const char* name, auto& slot) {
    if (!api.why_not.empty()) return;
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    const cudaError_t rc = cudaGetDriverEntryPointByVersion(name, &fn, kEntryPointVersion, cudaEnableDefault, &found);
#else
    const cudaError_t rc = cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &found);
#endif
    if (rc != cudaSuccess) {
      (void)cudaGetLastError();
      api.why_not = format("cudaGetDriverEntryPoint(\"{}\") failed: {}; is the NVIDIA driver (libcuda) installed?",
                           name, cuda_error_text(rc));
    } else if (found != cudaDriverEntryPointSuccess || fn == nullptr) {
      api.why_not = format("the CUDA driver has no entry point {} (query result {}); update the NVIDIA driver to "
                           "CUDA 12.0 or later",
                           name, static_cast<int>(found));
    } else {
      slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(fn);
    }
  };
#define APERTURE_DRIVER_LOAD(name) load(#name, api.name);
  APERTURE_DRIVER_ENTRIES(APERTURE_DRIVER_LOAD)
#undef APERTURE_DRIVER_LOAD
  api.loaded = api.why_not.empty();
  return api;
}
}  // namespace cu_detail

// The table, looked up on first use (thread-safe); may be !loaded, with why_not saying why.
inline const DriverApi& driver_api_or_not() {
  static const DriverApi api = cu_detail::load_driver_api();
  return api;
}

// The table; throws aperture::Error naming `who` and the missing entry point when there is none.
inline const DriverApi& driver_api(std::string_view who = "CUDA driver") {
  const DriverApi& api = driver_api_or_not();
  if (!api.loaded) throw Error(ErrorCode::unavailable, format("{}: {}", who, api.why_not), "cudaGetDriverEntryPoint");
  return api;
}

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
inline std::string cu_error_text(CUresult status) {
  const DriverApi& api = driver_api_or_not();
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName != nullptr) (void)api.cuGetErrorName(status, &name);
  if (api.cuGetErrorString != nullptr) (void)api.cuGetErrorString(status, &text);
  return std::string(name != nullptr ? name : "CUresult " + std::to_string(static_cast<int>(status))) + " (" +
         (text != nullptr ? text : "unknown") + ")";
}

// "" when `status` is CUDA_SUCCESS; otherwise "<call> failed: <name> (<text>) at <file>:<line>".
inline std::string cu_failure(CUresult status, std::string_view call, const char* file, int line) {
  if (status == CUDA_SUCCESS) return {};
  if (call.substr(0, 3) == "cu.") call.remove_prefix(3);  // "cu.cuMemMap(...)" reads as "cuMemMap(...)"
  return call_failure_text(call, cu_error_text(status), file, line);
}

// As cuda_error_code: a full device is out_of_memory, a missing device or driver unavailable.
inline ErrorCode cu_error_code(CUresult status) {
  switch (status) {
    case CUDA_ERROR_OUT_OF_MEMORY: return ErrorCode::out_of_memory;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_NOT_SUPPORTED: return ErrorCode::unavailable;
    default: return ErrorCode::system;
  }
}

// Throws aperture::Error("<context>: <call> failed: ...") when `status` is not CUDA_SUCCESS.
inline void check_cu(CUresult status, std::string_view call, const char* file, int line,
                     std::string_view context = {}) {
  if (status != CUDA_SUCCESS)
    throw_call_failure(cu_error_code(status), call, cu_failure(status, call, file, line), context);
}

}  // namespace aperture::detail

// Throws aperture::Error naming the driver call, the status and file:line; the optional second
// argument says what the call was for ("cuda-vmm grow"), prefixed to the message.
#define APERTURE_CU_CHECK(call, ...) \
  ::aperture::detail::check_cu((call), #call, __FILE__, __LINE__ __VA_OPT__(, ) __VA_ARGS__)
// Evaluates to "" on success and to the failure's description otherwise; never throws.
#define APERTURE_CU_TRY(call) ::aperture::detail::cu_failure((call), #call, __FILE__, __LINE__)
