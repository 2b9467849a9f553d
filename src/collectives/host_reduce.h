// src/collectives/host_reduce.h — run_host_reduction<T>: every reduction kind of element type T
// on a CPU thread, for any ReduceOp. Defined in host_reduce.inc and instantiated once per element
// type in a file of its own, which src/collectives/CMakeLists.txt generates (so the reductions
// compile side by side, and the sanitizer builds do not compile 420 functions in one file).
#pragma once

#include "aperture/collectives/handle.h"
#include "aperture/coop.h"
#include "dispatch.h"

namespace aperture::collectives::detail {

template <class T>
void run_host_reduction(const CoopHost& g, const CollectiveHandle& h, const Call& c);

}  // namespace aperture::collectives::detail
