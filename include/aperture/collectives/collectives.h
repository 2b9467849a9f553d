// aperture/collectives/collectives.h — everything of the collectives: the host class and the
// device-side algorithms (each also includable on its own).
#pragma once

#include "aperture/collectives/types.h"
#include "aperture/collectives/group.h"
#include "aperture/collectives/bulk.h"
#include "aperture/collectives/handle.h"
#include "aperture/collectives/partition.h"
#include "aperture/collectives/ll.h"
#include "aperture/collectives/barrier.h"
#include "aperture/collectives/staged.h"
#include "aperture/collectives/broadcast.h"
#include "aperture/collectives/all_gather.h"
#include "aperture/collectives/reduce_scatter.h"
#include "aperture/collectives/all_reduce.h"
#include "aperture/collectives/all_to_all.h"
#include "aperture/collectives/communicator.h"
