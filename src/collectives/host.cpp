// src/collectives/host.cpp — the collectives on a CPU thread: the same templates the GPU
// kernels run (run_collective.h), with aperture::CoopHost as the Coop: the barrier and the data
// movements here, the reductions of every element type in files of their own (host_reduce.h;
// the narrow floats as their bits, detail/float_formats.h).
#include "aperture/coop.h"
#include "dispatch.h"
#include "host_reduce.h"
#include "run_collective.h"

namespace aperture::collectives::detail {

void run_on_host(const CollectiveHandle& h, const Call& c, unsigned spins) {
  CoopHost g;
  g.spins = spins;
  dispatch_call(
      c, [&]<Kind K, class W>() { run_collective<K, ReduceOp::sum, W>(g, h, c); },
      [&]<DataType D>() { run_host_reduction<CpuType<D>>(g, h, c); });
}

}  // namespace aperture::collectives::detail
