# NCCL 2.28+ for the nccl provider: nccl.h, the device API headers (nccl_device.h) and
# libnccl.so.2 from
#   1. NCCL_HOME (a CMake or environment variable: an NCCL install or the wheel's folder),
#   2. the CUDA toolkit's own include and library folders, or
#   3. the nvidia-nccl-cu13 Python package (what PyTorch brings), found through python3.
# The provider fills its tables in a small kernel through NCCL's device API, which is all
# inline headers: no relocatable device code, no static device library. When NCCL 2.28+ is not
# found the provider is not built, and `aperture info` says so.
#
# Needs cmake/nvshmem.cmake's aperture_python_package_dir (include that first).
# Defines APERTURE_WITH_NCCL and, when ON, the INTERFACE target aperture_nccl.
set(APERTURE_NCCL "AUTO" CACHE STRING "nccl provider: AUTO (when NCCL 2.28+ is found), ON or OFF")
set(NCCL_HOME "$ENV{NCCL_HOME}" CACHE PATH "Where NCCL is (include/ and lib/); empty: the CUDA toolkit, then the Python wheel")
set(APERTURE_WITH_NCCL OFF)

set(_aperture_nccl_why "")
if(APERTURE_NCCL STREQUAL "OFF")
  set(_aperture_nccl_why "APERTURE_NCCL=OFF")
elseif(NOT APERTURE_WITH_CUDA)
  set(_aperture_nccl_why "no CUDA compiler")
else()
  set(_hints "")
  if(NCCL_HOME)
    list(APPEND _hints "${NCCL_HOME}")
  else()
    list(APPEND _hints ${CUDAToolkit_INCLUDE_DIRS} "${CUDAToolkit_LIBRARY_ROOT}" "${CUDAToolkit_LIBRARY_DIR}"
         "${CUDAToolkit_LIBRARY_DIR}/..")
    aperture_python_package_dir(nvidia.nccl _wheel)
    if(_wheel)
      list(APPEND _hints "${_wheel}")
    endif()
  endif()
  # Headers and library must come from the same place: look for the pair in each hint in turn.
  foreach(_hint IN LISTS _hints)
    unset(_inc CACHE)
    unset(_lib CACHE)
    find_path(_inc nccl_device.h HINTS "${_hint}" PATH_SUFFIXES include . NO_DEFAULT_PATH)
    find_library(_lib NAMES nccl libnccl.so.2 HINTS "${_hint}" PATH_SUFFIXES lib lib64 . ../lib ../lib64 NO_DEFAULT_PATH)
    if(_inc AND _lib AND EXISTS "${_inc}/nccl.h")
      get_filename_component(APERTURE_NCCL_INCLUDE_DIR "${_inc}" ABSOLUTE)
      get_filename_component(APERTURE_NCCL_LIBRARY "${_lib}" ABSOLUTE)
      break()
    endif()
  endforeach()
  unset(_inc CACHE)
  unset(_lib CACHE)
  if(APERTURE_NCCL_INCLUDE_DIR)
    file(STRINGS "${APERTURE_NCCL_INCLUDE_DIR}/nccl.h" _code REGEX "#define NCCL_VERSION_CODE [0-9]+")
    string(REGEX MATCH "[0-9]+$" _code "${_code}")
    if(NOT _code OR _code LESS 22800)
      set(_aperture_nccl_why "NCCL at ${APERTURE_NCCL_INCLUDE_DIR} is version code ${_code}; the provider needs 2.28 or newer")
    else()
      set(APERTURE_WITH_NCCL ON)
      math(EXPR _major "${_code} / 10000")
      math(EXPR _minor "${_code} / 100 % 100")
      math(EXPR _patch "${_code} % 100")
      set(APERTURE_NCCL_VERSION "${_major}.${_minor}.${_patch}")
      add_library(aperture_nccl INTERFACE)
      target_include_directories(aperture_nccl INTERFACE "${APERTURE_NCCL_INCLUDE_DIR}")
      target_link_libraries(aperture_nccl INTERFACE "${APERTURE_NCCL_LIBRARY}" CUDA::cudart)
    endif()
  else()
    set(_aperture_nccl_why "NCCL 2.28+ with its device API (nccl_device.h) not found (set NCCL_HOME, or `pip install "
                           "nvidia-nccl-cu13` for the python3 on PATH)")
  endif()
endif()

if(APERTURE_WITH_NCCL)
  message(STATUS "aperture: nccl provider ON (NCCL ${APERTURE_NCCL_VERSION}: ${APERTURE_NCCL_LIBRARY})")
elseif(APERTURE_NCCL STREQUAL "ON")
  message(FATAL_ERROR "APERTURE_NCCL=ON but the nccl provider cannot be built: ${_aperture_nccl_why}")
else()
  message(STATUS "aperture: nccl provider not built: ${_aperture_nccl_why}")
endif()
