// src/engines/mpi_engines.h — the two MPI engines behind engine.h's open and close (MPI
// builds only). Each opens collectively on every rank, and its OpenEngine's `close` is its own.
// The callers (engines.cpp) have checked that MPI runs at MPI_THREAD_MULTIPLE.
#pragma once

#include <cstddef>
#include <memory>

#include "engines/engine.h"
#include "engines/target_memory.h"

namespace aperture::detail {

// MPI one-sided communication on a window over [local_base, local_base + bytes) (mpi_rma.cpp).
OpenEngine open_rma_engine(Team& team, void* local_base, std::size_t bytes);
void close_rma_engine(OpenEngine& engine);

// MPI messages to each rank's service thread, which applies them to `memory`, this rank's
// copy of `bytes` bytes (message_engine.cpp).
OpenEngine open_message_engine(Team& team, std::unique_ptr<TargetMemory> memory, std::size_t bytes);
void close_message_engine(OpenEngine& engine);

}  // namespace aperture::detail
