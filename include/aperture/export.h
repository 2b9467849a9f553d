// aperture/export.h — APERTURE_API: what libaperture.so exports.
//
// The library is built with hidden visibility: a symbol is exported only when its declaration
// says APERTURE_API. Public classes and functions defined in the library carry it, and so does
// the little that the public inline headers share with the library (the job watch of
// detail/host_wait.h: one per process). Everything else (the bootstrap, the providers'
// classes) stays inside; tests and tools that need it link aperture::internal.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#  define APERTURE_API __attribute__((visibility("default")))
#else
#  define APERTURE_API
#endif
