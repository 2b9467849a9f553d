// aperture/collectives/collectives.h — everything of the collectives: the host class and the
// device-side algorithms (each also includable on its own). A kernel of yours calls an
// algorithm with a Coop (aperture/coop.h) and Communicator::collective_view(); what the algorithms share
// (the LL format, the staged steps, the partition, the barrier session, the tuning table) lives
// in aperture/collectives/detail/ and is not part of the interface.
#pragma once

#include "aperture/coop.h"
#include "aperture/coop_rma.h"
#include "aperture/collectives/types.h"
#include "aperture/collectives/handle.h"
#include "aperture/collectives/barrier.h"
#include "aperture/collectives/broadcast.h"
#include "aperture/collectives/all_gather.h"
#include "aperture/collectives/reduce_scatter.h"
#include "aperture/collectives/all_reduce.h"
#include "aperture/collectives/all_to_all.h"
#include "aperture/collectives/communicator.h"
#include "aperture/collectives/overlapped_gemm.h"
