# cmake/visibility.cmake — aperture's shared libraries export their public API and nothing else.
#
# Code is compiled with hidden visibility; what a public header marks APERTURE_API
# (include/aperture/export.h) is exported. The linker then keeps local whatever else the compiler
# made visible (standard library templates instantiated inside). tests/install/check-exports.sh
# checks the result, in the build tree (ctest -R symbols) and in the installed package.

set(APERTURE_EXPORTS_MAP ${CMAKE_CURRENT_LIST_DIR}/exports.map)

# aperture_hide_symbols(TARGET): compile TARGET's C++ and CUDA code with hidden visibility.
function(aperture_hide_symbols target)
  set_target_properties(${target} PROPERTIES CXX_VISIBILITY_PRESET hidden CUDA_VISIBILITY_PRESET hidden
                                             VISIBILITY_INLINES_HIDDEN ON)
endfunction()

# aperture_export_public_api(TARGET): link the shared library TARGET to export aperture::... only.
function(aperture_export_public_api target)
  target_link_options(${target} PRIVATE "LINKER:--version-script=${APERTURE_EXPORTS_MAP}")
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${APERTURE_EXPORTS_MAP})
endfunction()
