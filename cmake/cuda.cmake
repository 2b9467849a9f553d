# cmake/cuda.cmake — how every aperture build turns CUDA on: the top-level CMakeLists.txt, and the
# stand-alone GPU builds of tests/gpu and tests/collectives (for a GPU machine without GoogleTest).

# nvcc from /usr/local/cuda unless the caller chose one; sm_90 (Hopper) unless the caller chose,
# with -DCMAKE_CUDA_ARCHITECTURES or CMake's own CUDAARCHS variable in the environment (CI sets
# CUDAARCHS=90-virtual: PTX only, which checks every kernel compiles without ptxas's time).
macro(aperture_default_cuda_compiler)
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc AND NOT DEFINED ENV{CUDACXX})
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
    set(CMAKE_CUDA_ARCHITECTURES 90)
  endif()
endmacro()

# Enables CUDA as C++20 and finds the toolkit (CUDA::cudart, CUDA::cuda_driver).
macro(aperture_enable_cuda)
  enable_language(CUDA)
  # CMake learned to ask nvcc for C++20 only in 3.25.2; Debian 12 ships 3.25.1. CUDA targets
  # there also set CUDA_STANDARD_REQUIRED OFF (cxx_std_20 from aperture::aperture cannot be
  # expressed for nvcc).
  if(CMAKE_VERSION VERSION_LESS 3.25.2)
    add_compile_options($<$<COMPILE_LANGUAGE:CUDA>:-std=c++20>)
    # Also the default for every target: a C++ target that links aperture::internal receives
    # the nccl table's nvcc-built objects and, under the Makefile generator, becomes a CUDA
    # target that would otherwise demand a CUDA20 dialect CMake cannot name.
    set(CMAKE_CUDA_STANDARD_REQUIRED OFF)
  else()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  endif()
  # One CUDA runtime per process, shared, as the library's CUDA providers use it.
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  find_package(CUDAToolkit REQUIRED)
endmacro()

# The stand-alone GPU test builds: CUDA on, the library and the `aperture` command built from the
# repository root (`root`), no GoogleTest suites, CTest on.
macro(aperture_standalone_gpu_build root)
  aperture_default_cuda_compiler()
  aperture_enable_cuda()
  set(BUILD_TESTING OFF CACHE BOOL "Build aperture's GoogleTest suites (off: a stand-alone GPU test build)")
  add_subdirectory("${root}" aperture)
  enable_testing()
endmacro()
