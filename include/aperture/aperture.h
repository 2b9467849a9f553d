// aperture/aperture.h — everything: device operations, the address map, bulk transfers, Team and
// providers.
//
// Device code may include just what it uses (translate.h, rma.h, atomic.h, signal.h,
// peer_view.h, and coop.h + coop_rma.h for the group-cooperative forms); none of those needs a
// CUDA header on a CPU.
#pragma once

#include "aperture/config.h"
#include "aperture/error.h"
#include "aperture/translate.h"
#include "aperture/rma.h"
#include "aperture/atomic.h"
#include "aperture/signal.h"
#include "aperture/coop.h"
#include "aperture/coop_rma.h"
#include "aperture/peer_view.h"
#include "aperture/gpu_proxy.h"
#include "aperture/address_map.h"
#include "aperture/bulk.h"
#include "aperture/team.h"
#include "aperture/provider.h"
