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

// bulk_put/get/copy(automatic) take the copy engine from this many bytes on and the SM copy
// kernel below: the copy engine's start costs more than a kernel's at small sizes, and SM stores
// into a peer plateau below the copy engine at large ones (DESIGN.md's yardsticks). [bulk]
inline constexpr std::size_t kBulkCopyEngineMinBytes = std::size_t{1} << 20;

}  // namespace aperture::detail
