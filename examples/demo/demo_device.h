// examples/demo/demo_device.h — the demo's ranks on GPU memory: one CUDA block per rank runs the same
// ring and all-reduce (demo_algorithm.h) as the CPU path.
//
// Built from demo_device.cu when aperture is built with CUDA; otherwise demo_device_none.cpp
// says so.
#pragma once

#include "demo.h"

#include "aperture/peer_view.h"
#include "aperture/team.h"

namespace aperture::demo {

// Runs prepare, ring and all-reduce as kernels on the current device (the provider chose it),
// with team barriers between them; `buffers` point into device memory. Throws aperture::Error on
// CUDA errors.
DemoRankResult run_on_device(Team& team, const PeerView& peers, const demo::Buffers& buffers);

}  // namespace aperture::demo
