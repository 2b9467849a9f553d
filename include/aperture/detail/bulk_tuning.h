// aperture/detail/bulk_tuning.h — the tuning constant of aperture/bulk.h.
//
// As in aperture/collectives/detail/tuning.h: the value, one line on why, and the section of
// docs/PERFORMANCE.md whose measurement chose it. Change it only with a new measurement there.
// BulkOptions::copy_engine_min_bytes overrides it per call.
//
//   [bulk] #stream-ordered-bulk-putget-the-copy-engine-against-the-sm-copy
#pragma once

#include <cstddef>

namespace aperture::detail {

// bulk_put/get/copy(automatic) to another rank take the copy engine from this many bytes on and
// the SM copy kernel below. Reasoned for peers over NVLink, not measured (no 2-GPU machine lent
// since it was built): on the expectation that a copy engine's transfer to a peer starts slower
// than a kernel's at small sizes (unverified), and because SM-driven copies into a peer plateau at
// 0.93-0.95x the copy engine at large ones (measured on 2x H200 by bench/standalone/put_variants.cu:
// bench/results/2026-11-30-h200-x2/NOTES.md, "Why SM-driven copies stop at about 0.93-0.95x").
// Measured on one H200 for local copies [bulk]: the copy engine took 0.84x-0.95x the SM copy's
// time at every size from 4 KiB to 256 MiB, so a transfer within the caller's own copy takes the
// copy engine at every size (bulk_path_for's to_self), whatever this says.
inline constexpr std::size_t kBulkCopyEngineMinBytes = std::size_t{1} << 20;

}  // namespace aperture::detail
