# tests/googletest.cmake — where the test suites get GoogleTest (GTest::gtest, GTest::gtest_main).
#
# Included by tests/CMakeLists.txt and by the stand-alone GPU build (tests/gpu). In this order:
#   1. APERTURE_GTEST_SOURCE_DIR (or FETCHCONTENT_SOURCE_DIR_GOOGLETEST), a googletest source
#      tree, is built here with the tests. The GPU machine reaches no registry and keeps nothing
#      between calls, so scripts/gpu-check.sh brings the sources with the tree (.deps/googletest,
#      filled by scripts/vendor-gtest.sh) and points this variable at them.
#   2. an installed GoogleTest (find_package(GTest): Debian's libgtest-dev on the CI machine);
#   3. otherwise configuration stops and says how to provide one.
# Nothing is downloaded: the build never depends on reaching the network.
include_guard(GLOBAL)

if(NOT APERTURE_GTEST_SOURCE_DIR AND FETCHCONTENT_SOURCE_DIR_GOOGLETEST)
  set(APERTURE_GTEST_SOURCE_DIR "${FETCHCONTENT_SOURCE_DIR_GOOGLETEST}")
endif()
set(APERTURE_GTEST_SOURCE_DIR "${APERTURE_GTEST_SOURCE_DIR}" CACHE PATH
    "A googletest source tree to build with the tests (empty: use an installed GoogleTest)")

if(APERTURE_GTEST_SOURCE_DIR)
  if(NOT EXISTS "${APERTURE_GTEST_SOURCE_DIR}/googletest/CMakeLists.txt")
    message(FATAL_ERROR "aperture: APERTURE_GTEST_SOURCE_DIR='${APERTURE_GTEST_SOURCE_DIR}' is not a googletest "
                        "source tree (no googletest/CMakeLists.txt there); scripts/vendor-gtest.sh makes one")
  endif()
  # Only the library: no GoogleMock, and nothing installed with aperture.
  set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
  set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
  add_subdirectory("${APERTURE_GTEST_SOURCE_DIR}" "${CMAKE_BINARY_DIR}/_deps/googletest" EXCLUDE_FROM_ALL SYSTEM)
  # Older googletest releases define the plain targets only; the suites link the namespaced names.
  foreach(lib gtest gtest_main)
    if(NOT TARGET GTest::${lib})
      add_library(GTest::${lib} ALIAS ${lib})
    endif()
  endforeach()
  message(STATUS "aperture: GoogleTest built from ${APERTURE_GTEST_SOURCE_DIR}")
else()
  find_package(GTest QUIET)
  if(NOT GTest_FOUND)
    message(FATAL_ERROR
      "aperture: the tests need GoogleTest and none was found. Either install it (Debian: libgtest-dev), or "
      "give a googletest source tree to build: -DAPERTURE_GTEST_SOURCE_DIR=<dir> (scripts/vendor-gtest.sh "
      "copies one into .deps/googletest), or configure with -DBUILD_TESTING=OFF.")
  endif()
  message(STATUS "aperture: GoogleTest found installed (${GTest_DIR})")
endif()
