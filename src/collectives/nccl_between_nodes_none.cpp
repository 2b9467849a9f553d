// src/collectives/nccl_between_nodes_none.cpp — NcclBetweenNodes where aperture_collectives was
// built without NCCL: built() is false, so the hierarchy chooses MPI (or refuses
// APERTURE_COLLECTIVES_BETWEEN_NODES=nccl, between_nodes_choice.h) and makes none of these.
#include "aperture/error.h"
#include "nccl_between_nodes.h"

namespace aperture::collectives::detail {

struct NcclBetweenNodes::State {};

namespace {
[[noreturn]] void no_nccl() {
  throw Error(ErrorCode::internal, "Communicator (across nodes): internal: an NCCL exchange in a build without NCCL");
}
}  // namespace

bool NcclBetweenNodes::built() { return false; }
// By value, as in the NCCL build, which keeps (moves) the callback.
NcclBetweenNodes::NcclBetweenNodes(std::uint64_t,
                                   std::function<void(const std::string&)>) {  // NOLINT(performance-unnecessary-value-param)
  no_nccl();
}
NcclBetweenNodes::~NcclBetweenNodes() = default;
void NcclBetweenNodes::all_gather(const Group&, const void*, void*, std::size_t, void*, const char*) { no_nccl(); }
void NcclBetweenNodes::all_gather_varying(const Group&, const void*, void*, const std::vector<std::size_t>&, void*,
                                          const char*) {
  no_nccl();
}
void NcclBetweenNodes::broadcast(const Group&, void*, std::size_t, int, void*, const char*) { no_nccl(); }
void NcclBetweenNodes::all_to_all(const Group&, const void*, void*, std::size_t, void*, const char*) { no_nccl(); }
void NcclBetweenNodes::check() const {}

}  // namespace aperture::collectives::detail
