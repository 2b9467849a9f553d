# NVSHMEM for the nvshmem provider: headers and the host library (libnvshmem_host.so.3) from
#   1. NVSHMEM_HOME (a CMake or environment variable: an NVSHMEM install or the wheel's folder), or
#   2. the nvidia-nvshmem-cu13 Python package (`pip install nvidia-nvshmem-cu13==3.4.5`), found
#      through python3.
# The provider uses only NVSHMEM's host API, so aperture needs neither libnvshmem_device.a nor
# relocatable device code; APERTURE_NVSHMEM_DEVICE_LIBRARY is recorded for programs that want
# NVSHMEM's device API beside it. When NVSHMEM is not found the provider is not built, and
# `aperture info` says so.
#
# Defines APERTURE_WITH_NVSHMEM and, when ON, the INTERFACE target aperture_nvshmem_host.
set(APERTURE_NVSHMEM "AUTO" CACHE STRING "nvshmem provider: AUTO (when NVSHMEM is found), ON or OFF")
set(NVSHMEM_HOME "$ENV{NVSHMEM_HOME}" CACHE PATH "Where NVSHMEM is (include/ and lib/); empty: look for the Python wheel")
set(APERTURE_WITH_NVSHMEM OFF)

function(aperture_python_package_dir module out)
  find_program(APERTURE_PYTHON3 NAMES python3 python)
  set(dir "")
  if(APERTURE_PYTHON3)
    # A namespace package: its folder comes from __path__, not __file__.
    execute_process(
      COMMAND "${APERTURE_PYTHON3}" -c "import ${module} as m; print(list(m.__path__)[0])"
      OUTPUT_VARIABLE dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      set(dir "")
    endif()
  endif()
  set(${out} "${dir}" PARENT_SCOPE)
endfunction()

set(_aperture_nvshmem_why "")
if(APERTURE_NVSHMEM STREQUAL "OFF")
  set(_aperture_nvshmem_why "APERTURE_NVSHMEM=OFF")
elseif(NOT APERTURE_WITH_CUDA)
  set(_aperture_nvshmem_why "no CUDA compiler")
else()
  set(_hints "")
  if(NVSHMEM_HOME)
    list(APPEND _hints "${NVSHMEM_HOME}")
  else()
    aperture_python_package_dir(nvidia.nvshmem _wheel)
    if(_wheel)
      list(APPEND _hints "${_wheel}")
    endif()
  endif()
  if(_hints)
    find_path(APERTURE_NVSHMEM_INCLUDE_DIR nvshmem_host.h HINTS ${_hints} PATH_SUFFIXES include NO_DEFAULT_PATH)
    find_library(APERTURE_NVSHMEM_HOST_LIBRARY NAMES nvshmem_host libnvshmem_host.so.3
                 HINTS ${_hints} PATH_SUFFIXES lib lib64 NO_DEFAULT_PATH)
    find_library(APERTURE_NVSHMEM_DEVICE_LIBRARY NAMES nvshmem_device libnvshmem_device.a
                 HINTS ${_hints} PATH_SUFFIXES lib lib64 NO_DEFAULT_PATH)
  endif()
  if(APERTURE_NVSHMEM_INCLUDE_DIR AND APERTURE_NVSHMEM_HOST_LIBRARY)
    file(STRINGS "${APERTURE_NVSHMEM_INCLUDE_DIR}/non_abi/nvshmem_version.h" _major
         REGEX "#define NVSHMEM_VENDOR_MAJOR_VERSION [0-9]+")
    file(STRINGS "${APERTURE_NVSHMEM_INCLUDE_DIR}/non_abi/nvshmem_version.h" _minor
         REGEX "#define NVSHMEM_VENDOR_MINOR_VERSION [0-9]+")
    file(STRINGS "${APERTURE_NVSHMEM_INCLUDE_DIR}/non_abi/nvshmem_version.h" _patch
         REGEX "#define NVSHMEM_VENDOR_PATCH_VERSION [0-9]+")
    string(REGEX MATCH "[0-9]+$" _major "${_major}")
    string(REGEX MATCH "[0-9]+$" _minor "${_minor}")
    string(REGEX MATCH "[0-9]+$" _patch "${_patch}")
    set(APERTURE_NVSHMEM_VERSION "${_major}.${_minor}.${_patch}")
    if(APERTURE_NVSHMEM_VERSION VERSION_LESS 3.0)
      set(_aperture_nvshmem_why "NVSHMEM ${APERTURE_NVSHMEM_VERSION} at ${APERTURE_NVSHMEM_INCLUDE_DIR} is older than 3.0")
    else()
      set(APERTURE_WITH_NVSHMEM ON)
      add_library(aperture_nvshmem_host INTERFACE)
      target_include_directories(aperture_nvshmem_host INTERFACE "${APERTURE_NVSHMEM_INCLUDE_DIR}")
      target_link_libraries(aperture_nvshmem_host INTERFACE "${APERTURE_NVSHMEM_HOST_LIBRARY}" CUDA::cudart)
    endif()
  else()
    set(_aperture_nvshmem_why
        "NVSHMEM not found (set NVSHMEM_HOME, or `pip install nvidia-nvshmem-cu13==3.4.5` for the python3 on PATH)")
  endif()
endif()

if(APERTURE_WITH_NVSHMEM)
  message(STATUS "aperture: nvshmem provider ON (NVSHMEM ${APERTURE_NVSHMEM_VERSION}: ${APERTURE_NVSHMEM_HOST_LIBRARY})")
elseif(APERTURE_NVSHMEM STREQUAL "ON")
  message(FATAL_ERROR "APERTURE_NVSHMEM=ON but the nvshmem provider cannot be built: ${_aperture_nvshmem_why}")
else()
  message(STATUS "aperture: nvshmem provider not built: ${_aperture_nvshmem_why}")
endif()
