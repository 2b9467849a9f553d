// src/launcher/reaper.h — no process outlives the job: leftovers the ranks started are adopted and killed.
//
// The launcher makes itself a child subreaper, so a process a rank started and left behind
// (a background job, a daemon that left the rank's process group) becomes the launcher's child
// when its parent dies, instead of init's. At the end of the job every such child is killed and
// reaped. The launcher's own death is covered separately: each rank has PR_SET_PDEATHSIG(SIGKILL).
#pragma once

#include <sys/types.h>

namespace aperture::launcher {

// PR_SET_CHILD_SUBREAPER on this process.
void become_subreaper();

// SIGKILLs the whole process group `pgid` (if any member is left) and then every child of this
// process, again and again as their own children are handed to us, reaping each. Gives up after
// `limit_ms` (a process stuck in the kernel cannot be reaped). Returns how many it killed.
int kill_leftovers(pid_t pgid, int limit_ms = 5000);

}  // namespace aperture::launcher
