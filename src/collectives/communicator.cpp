// src/collectives/communicator.cpp — aperture::Communicator: the scratch, the argument checks,
// and the choice between the CPU code and the GPU launchers.
#include "aperture/collectives/communicator.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <thread>

#include "aperture/collectives/detail/tuning.h"
#include "aperture/detail/host_wait.h"
#include "aperture/error.h"
#include "aperture/team.h"
#include "common/env.h"
#include "dispatch.h"
#include "hierarchical.h"

namespace aperture {

namespace {

using collectives::detail::Call;
using collectives::detail::Kind;

namespace tuning = collectives::tuning;

std::size_t round_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }

void check_op(const char* call, ReduceOp op) {
  if (static_cast<unsigned>(op) > static_cast<unsigned>(ReduceOp::avg))
    throw Error(ErrorCode::invalid_argument, std::string("Communicator::") + call + ": ReduceOp " +
                std::to_string(static_cast<int>(op)) + " is not one of aperture::ReduceOp's values (sum, min, max, prod, avg)");
}

}  // namespace

Communicator::Communicator(Provider& provider, Team& team, Options options)
    : provider_(provider), team_(team), kind_(provider.memory_kind()), options_(options) {
  const bool device = kind_ == MemoryKind::device;
  if (device && !collectives::detail::device_support_compiled())
    throw Error(ErrorCode::unavailable, "Communicator: provider " + std::string(provider.name()) +
                " serves GPU memory, but aperture_collectives was built without CUDA; rebuild with nvcc found");
  const int world = team.size();
  if (options_.max_parts < 0 || options_.max_parts > 1024)
    throw Error(ErrorCode::invalid_argument, "Communicator: Options::max_parts = " + std::to_string(options_.max_parts) +
                " is out of range; give 0 (the default) or 1 to 1024");
  if (options_.max_parts == 0) options_.max_parts = device ? tuning::kDeviceParts : 1;
  if (!device && options_.max_parts != 1)
    throw Error(ErrorCode::invalid_argument, "Communicator: Options::max_parts = " + std::to_string(options_.max_parts) +
                " on host memory: a CPU rank runs each collective on one thread; give 0 or 1");
  if (options_.block_threads == 0) options_.block_threads = tuning::kDeviceThreads;
  // The kernels are compiled for at most tuning::kDeviceThreads threads (__launch_bounds__ in
  // device.cu): that bound is what lets the reductions keep several vectors in flight in registers.
  if (options_.block_threads < 32 || options_.block_threads > tuning::kDeviceThreads || options_.block_threads % 32 != 0 ||
      options_.block_threads < world)
    throw Error(ErrorCode::invalid_argument, "Communicator: Options::block_threads = " + std::to_string(options_.block_threads) +
                " must be a multiple of 32 from 32 to " + std::to_string(tuning::kDeviceThreads) +
                ", and at least the team size (" + std::to_string(world) + ")");
  if (options_.half_bytes == 0) options_.half_bytes = device ? tuning::kDeviceHalfBytes : tuning::kHostHalfBytes;
  const std::size_t least = 256 * static_cast<std::size_t>(world);
  if (options_.half_bytes < least)
    throw Error(ErrorCode::invalid_argument, "Communicator: Options::half_bytes = " + std::to_string(options_.half_bytes) +
                " is too small for " + std::to_string(world) + " ranks: give at least 256 x ranks = " +
                std::to_string(least) + " (or 0 for the default)");
  options_.half_bytes = round_up(options_.half_bytes, 256);
  // The table's choice for this rank count (tuning.h: measured, or reasoned where no machine was).
  if (options_.one_shot_max_bytes == 0) options_.one_shot_max_bytes = tuning::one_shot_max_bytes(device, world);

  if (options_.ll_part_bytes == 0) options_.ll_part_bytes = tuning::kDeviceLLBytesPerPart;
  // By default the LL path is chosen only where every block's share fits one piece.
  ll_parts_ = device ? std::min(options_.max_parts, tuning::kDeviceLLParts) : options_.max_parts;
  const std::size_t ll_one_piece = static_cast<std::size_t>(ll_parts_) * (tuning::kLLSlotBytes / 2);
  ll_max_bytes_ = options_.ll_max_bytes.value_or(std::min(tuning::ll_max_bytes(device, world), ll_one_piece));
  options_.ll_max_bytes = ll_max_bytes_;
  all_to_all_direct_min_bytes_ =
      options_.all_to_all_direct_min_bytes.value_or(tuning::all_to_all_direct_min_bytes(device, world));
  options_.all_to_all_direct_min_bytes = all_to_all_direct_min_bytes_;
  broadcast_direct_min_bytes_ =
      options_.broadcast_direct_min_bytes.value_or(tuning::broadcast_direct_min_bytes(device, world));
  options_.broadcast_direct_min_bytes = broadcast_direct_min_bytes_;
  // Ranks that share cores: a waiter runs only once the rank it waits for gives its core away.
  const unsigned cores = std::thread::hardware_concurrency();
  const bool ranks_share_cores = cores != 0 && static_cast<unsigned>(team.local_size()) > cores;
  broadcast_ll_max_bytes_ =
      options_.broadcast_ll_max_bytes.value_or(tuning::broadcast_ll_max_bytes(device, world, ranks_share_cores));
  if (device && broadcast_ll_max_bytes_ != 0)
    throw Error(ErrorCode::invalid_argument, "Communicator: Options::broadcast_ll_max_bytes = " +
                std::to_string(broadcast_ll_max_bytes_) + " on GPU memory: the push broadcast runs on host memory only; "
                "leave it unset or give 0");
  options_.broadcast_ll_max_bytes = broadcast_ll_max_bytes_;
  // Ranks that share cores: a waiter yields almost at once, so the rank it waits for runs.
  host_spins_ = env::collectives_spins().value_or(ranks_share_cores ? tuning::kHostSharedCoreSpins : tuning::kHostSpins);

  // A rank with other options would split the data differently: refuse before any memory.
  // Across nodes each node takes its own default for the push broadcast (its ranks may or may not
  // share cores): only a value the caller gave must agree.
  const bool each_node_decides = team.node_count() > 1 && !options.broadcast_ll_max_bytes.has_value();
  team.check_same("Communicator", {{"half_bytes", options_.half_bytes},
                                   {"max_parts", static_cast<std::uint64_t>(options_.max_parts)},
                                   {"one_shot_max_bytes", options_.one_shot_max_bytes},
                                   {"block_threads", static_cast<std::uint64_t>(options_.block_threads)},
                                   {"ll_max_bytes", ll_max_bytes_},
                                   {"ll_part_bytes", options_.ll_part_bytes},
                                   {"all_to_all_direct_min_bytes", all_to_all_direct_min_bytes_},
                                   {"broadcast_direct_min_bytes", broadcast_direct_min_bytes_},
                                   {"broadcast_ll_max_bytes", each_node_decides ? 0 : broadcast_ll_max_bytes_}});

  // The push broadcast's slots only where it can run (host memory).
  const std::uint64_t broadcast_depth = device ? 0 : tuning::kHostBroadcastLLDepth;
  const auto layout = collectives::ScratchLayout::make(world, options_.max_parts, options_.half_bytes, tuning::kLLSlotBytes,
                                                       broadcast_depth, tuning::kHostBroadcastLLSlotBytes);
  scratch_ = provider.allocate(layout.total_bytes, 256);
  try {
    // A team over several nodes runs the hierarchical algorithms (hierarchical.h); on one node
    // every rank must be direct.
    const bool spans_nodes = team.node_count() > 1;
    if (!scratch_.map.all_direct() && !spans_nodes) {
      std::string peers;
      for (int p : scratch_.map.indirect_peers()) peers += (peers.empty() ? "" : ", ") + std::to_string(p);
      throw Error(ErrorCode::unavailable, "Communicator: provider " + std::string(provider.name()) + " cannot reach rank(s) " + peers +
                  " by load/store from rank " + std::to_string(team.rank()) +
                  " (table entry 0); the collectives need every rank directly addressable (one node, peer access)");
    }
    auto* base = static_cast<unsigned char*>(scratch_.ptr);
    handle_.rank = team.rank();
    handle_.world_size = world;
    handle_.max_parts = options_.max_parts;
    handle_.peer_bases = scratch_.map.peer_bases();
    handle_.flags = reinterpret_cast<std::uint64_t*>(base + layout.flags_offset);
    handle_.epochs = reinterpret_cast<std::uint64_t*>(base + layout.epochs_offset);
    handle_.status = reinterpret_cast<std::uint64_t*>(base + layout.status_offset);
    handle_.staging = base + layout.staging_offset;
    handle_.half_bytes = options_.half_bytes;
    handle_.ll = base + layout.ll_offset;
    handle_.ll_slot_bytes = tuning::kLLSlotBytes;
    if (broadcast_depth != 0) {
      handle_.broadcast_depth = broadcast_depth;
      handle_.broadcast_slot_bytes = tuning::kHostBroadcastLLSlotBytes;
      handle_.broadcast_lines = base + layout.broadcast_lines_offset;
      handle_.broadcast_acks = reinterpret_cast<std::uint64_t*>(base + layout.broadcast_acks_offset);
      handle_.broadcast_state = reinterpret_cast<std::uint64_t*>(base + layout.broadcast_state_offset);
    }
    handle_.timeout_ns = detail::host_timeout_ns();
    if (device) {
      collectives::detail::device_select(scratch_.ptr);
      collectives::detail::device_zero(base, layout.control_bytes());
    } else {
      std::memset(base, 0, layout.control_bytes());
    }
    call_handle_ = handle_;
    call_handle_.ll_ends_kernel = true;  // one collective per kernel (or host call): the boundary orders it
    if (spans_nodes) {
      // The node's phases take the one-node choices of the tuning table for the node's rank count.
      const int local = team.local_size();
      collectives::detail::LocalChoices local_choices;
      local_choices.one_shot_max_bytes = tuning::one_shot_max_bytes(device, local);
      local_choices.ll_max_bytes = device ? std::min(tuning::ll_max_bytes(device, local), ll_one_piece) : 0;
      local_choices.broadcast_ll_max_bytes = tuning::broadcast_ll_max_bytes(device, local, ranks_share_cores);
      local_choices.ll_parts = ll_parts_;
      local_choices.ll_part_bytes = options_.ll_part_bytes;
      local_choices.max_parts = options_.max_parts;
      local_choices.block_threads = options_.block_threads;
      local_choices.host_spins = host_spins_;
      const auto table = scratch_.map.host_peer_bases();
      hierarchy_ = std::make_unique<collectives::detail::Hierarchy>(team, kind_, call_handle_, table.data(), local_choices);
    }
    team.barrier();  // every rank's flags are zero before anyone signals
  } catch (...) {
    provider.free(scratch_);
    throw;
  }
}

Communicator::~Communicator() {
  try {
    hierarchy_.reset();
    if (kind_ == MemoryKind::device) collectives::detail::device_synchronize();
    team_.barrier();  // peers may still read this rank's staging of the last call
    provider_.free(scratch_);
  } catch (...) {
    // A destructor does not throw; a rank that failed has already reported why.
  }
}

std::string_view Communicator::provider_name() const { return provider_.name(); }

std::string_view Communicator::between_nodes() const {
  return hierarchy_ ? collectives::detail::between_nodes_name(hierarchy_->between_nodes()) : "";
}

AllReduceAlgorithm Communicator::choose_all_reduce(std::size_t bytes) const {
  if (uses_ll(bytes)) return AllReduceAlgorithm::ll;
  // One rank: nothing to scatter; one-shot is a copy.
  if (size() == 1 || bytes <= options_.one_shot_max_bytes) return AllReduceAlgorithm::one_shot;
  return AllReduceAlgorithm::two_shot;
}

void Communicator::check_root(const char* call, int root) const {
  if (root < 0 || root >= size())
    throw Error(ErrorCode::invalid_argument, std::string("Communicator::") + call + ": root " + std::to_string(root) +
                " is not a rank of this team of " + std::to_string(size()));
}

void Communicator::check_call(const char* call, std::size_t count, DataType type, bool reduces, Stream stream,
                              std::size_t in_elements, std::size_t out_elements, const void* in,
                              const void* out) const {
  // Messages are built only on the way out: this runs on every call.
  const auto who = [call] { return std::string("Communicator::") + call; };
  if (aperture::detail::find_element_type(type) == nullptr)
    throw Error(ErrorCode::invalid_argument, who() + ": DataType " + std::to_string(static_cast<int>(type)) +
                " is not one of aperture::DataType's values (" + name_of(kAllDataTypes[0]) + " .. " +
                name_of(std::end(kAllDataTypes)[-1]) + ")");
  if (kind_ == MemoryKind::host) {
    if (stream != nullptr)
      throw Error(ErrorCode::invalid_argument, who() + ": a stream was given, but provider " + std::string(provider_.name()) +
                  " serves host memory, where the call runs on this thread; pass no stream");
  }
  (void)reduces;
  const std::size_t world = static_cast<std::size_t>(size());
  if (count > std::numeric_limits<std::size_t>::max() / world / 8)
    throw Error(ErrorCode::invalid_argument, who() + ": count = " + std::to_string(count) + " elements is too large");
  if (count != 0 && ((in_elements != 0 && in == nullptr) || (out_elements != 0 && out == nullptr)))
    throw Error(ErrorCode::invalid_argument, who() + ": a null buffer with count = " + std::to_string(count) + "; give buffers of " +
                std::to_string(in_elements) + " (in) and " + std::to_string(out_elements) + " (out) elements");
  if (kind_ == MemoryKind::device && count != 0) {
    collectives::detail::device_check_pointer(call, "in", in, stream);
    collectives::detail::device_check_pointer(call, "out", out, stream);
  }
}

namespace {

// Blocks for a GPU call: enough to keep each busy with tuning::kDeviceBytesPerPart, at most max_parts.
int parts_for(std::size_t bytes, int max_parts) {
  const std::size_t want = (bytes + tuning::kDeviceBytesPerPart - 1) / tuning::kDeviceBytesPerPart;
  return static_cast<int>(want < 1 ? 1 : want > static_cast<std::size_t>(max_parts) ? max_parts : want);
}

// The LL path: a block per `per_part` bytes of each rank's input.
int ll_parts_for(std::size_t bytes, int max_parts, std::size_t per_part) {
  const std::size_t want = (bytes + per_part - 1) / per_part;
  return static_cast<int>(want < 1 ? 1 : want > static_cast<std::size_t>(max_parts) ? max_parts : want);
}

// One rank: every collective is out = in (a fold over one rank is its input, bit for bit: avg's
// scale is exactly 1), so it is one copy, or nothing in place, with no kernel and no barrier.
// Ranges that overlap without being equal keep the kernel, which the copy engine does not allow.
bool copies_alone(const Call& c) {
  const auto* in = static_cast<const std::byte*>(c.in);
  const auto* out = static_cast<const std::byte*>(c.out);
  const std::size_t bytes = c.count * size_of(c.type);
  return in == out || in + bytes <= out || out + bytes <= in;
}

void run_alone(MemoryKind kind, const Call& c, Stream stream) {
  const std::size_t bytes = c.count * size_of(c.type);
  if (c.in == c.out || bytes == 0) return;
  if (kind == MemoryKind::host) {
    std::memcpy(c.out, c.in, bytes);
  } else {
    collectives::detail::device_copy(c.out, c.in, bytes, stream);
  }
}

}  // namespace

// payload_bytes: what the staged path moves; input_bytes: each rank's input (the LL path's share).
#define APERTURE_COLLECTIVE_RUN(call_struct, payload_bytes, input_bytes)                                            \
  do {                                                                                                              \
    if (size() == 1 && copies_alone(call_struct)) {                                                                 \
      run_alone(kind_, call_struct, stream);                                                                        \
    } else if (kind_ == MemoryKind::host) {                                                                         \
      collectives::detail::run_on_host(call_handle_, call_struct, host_spins_);                                          \
    } else {                                                                                                        \
      collectives::detail::device_launch(call_handle_, call_struct,                                                      \
                                         collectives::detail::is_ll((call_struct).kind) ? ll_parts_for(input_bytes, ll_parts_, options_.ll_part_bytes)  \
                                                                   : parts_for(payload_bytes, options_.max_parts),  \
                                         options_.block_threads, stream);                                           \
    }                                                                                                               \
  } while (0)

void Communicator::barrier(Stream stream) {
  check_call("barrier", 0, DataType::float32, false, stream, 0, 0, nullptr, nullptr);
  if (hierarchy_) return hierarchy_->barrier(stream);
  Call c;
  c.kind = Kind::barrier;
  if (kind_ == MemoryKind::host) {
    collectives::detail::run_on_host(call_handle_, c, host_spins_);
  } else {
    collectives::detail::device_launch(call_handle_, c, 1, options_.block_threads, stream);
  }
}

void Communicator::broadcast(const void* in, void* out, std::size_t count, DataType type, int root, Stream stream) {
  check_root("broadcast", root);
  check_call("broadcast", count, type, false, stream, rank() == root ? count : 0, count, in, out);
  if (hierarchy_) return hierarchy_->broadcast(in, out, count, type, root, stream);
  Call c{broadcast_uses_ll(count * size_of(type)) ? Kind::broadcast_ll : Kind::broadcast, in, out, count, type,
         ReduceOp::sum, root};
  APERTURE_COLLECTIVE_RUN(c, count * size_of(type), count * size_of(type));
}

void Communicator::all_gather(const void* in, void* out, std::size_t count, DataType type, Stream stream) {
  check_call("all_gather", count, type, false, stream, count, count * size(), in, out);
  if (hierarchy_) return hierarchy_->all_gather(in, out, count, type, stream);
  const std::size_t bytes = count * size_of(type);
  Call c{uses_ll(bytes) ? Kind::all_gather_ll : Kind::all_gather, in, out, count, type, ReduceOp::sum, 0};
  APERTURE_COLLECTIVE_RUN(c, bytes * size(), bytes);
}

void Communicator::reduce_scatter(const void* in, void* out, std::size_t count, DataType type, ReduceOp op,
                                  Stream stream) {
  check_op("reduce_scatter", op);
  check_call("reduce_scatter", count, type, true, stream, count * size(), count, in, out);
  if (hierarchy_) return hierarchy_->reduce_scatter(in, out, count, type, op, stream);
  const std::size_t bytes = count * size_of(type) * size();
  Call c{uses_ll(bytes) ? Kind::reduce_scatter_ll : Kind::reduce_scatter, in, out, count, type, op, 0};
  APERTURE_COLLECTIVE_RUN(c, bytes, bytes);
}

void Communicator::all_reduce(const void* in, void* out, std::size_t count, DataType type, ReduceOp op,
                              AllReduceAlgorithm algorithm, Stream stream) {
  check_op("all_reduce", op);
  check_call("all_reduce", count, type, true, stream, count, count, in, out);
  if (hierarchy_) return hierarchy_->all_reduce(in, out, count, type, op, stream);  // its own split (MULTINODE.md)
  const std::size_t bytes = count * size_of(type);
  if (algorithm == AllReduceAlgorithm::automatic) algorithm = choose_all_reduce(bytes);
  const Kind kind = algorithm == AllReduceAlgorithm::two_shot ? Kind::all_reduce_two_shot
                    : algorithm == AllReduceAlgorithm::ll     ? Kind::all_reduce_ll
                                                              : Kind::all_reduce_one_shot;
  Call c{kind, in, out, count, type, op, 0};
  APERTURE_COLLECTIVE_RUN(c, bytes, bytes);
}

const std::int64_t* Communicator::symmetric_input(const char* call, const SymmetricAddressMap& in_map, const void* in,
                                                  std::size_t bytes) const {
  const auto who = [call] { return std::string("Communicator::") + call + " (symmetric input)"; };
  if (in_map.world_size != size() || in_map.local_rank != rank())
    throw Error(ErrorCode::invalid_argument, who() + ": in_map is for rank " + std::to_string(in_map.local_rank) + " of " +
                std::to_string(in_map.world_size) + ", this Communicator is rank " + std::to_string(rank()) + " of " +
                std::to_string(size()) + "; give the map of an allocation made over the same team");
  if (!in_map.all_direct())
    throw Error(ErrorCode::invalid_argument, who() + ": in_map cannot reach every rank by load/store; use the form without in_map");
  if (bytes != 0 && in_map.allocation_bytes != 0 && !in_map.owns(in, bytes))
    throw Error(ErrorCode::invalid_argument, who() + ": `in` (" + std::to_string(bytes) + " bytes) does not lie inside the allocation in_map " +
                "describes (" + std::to_string(in_map.allocation_bytes) + " bytes)");
  return in_map.peer_bases();
}

namespace {

// The ranks of a status mask (collectives/handle.h: words 1.., rank r at bit r % 64 of word
// 1 + r / 64) as two lists, "1, 3": those marked and the others.
struct MarkedRanks {
  std::string marked, unmarked;
};

MarkedRanks marked_ranks(const std::uint64_t* status, int world) {
  MarkedRanks lists;
  const int recorded = static_cast<int>(std::min<std::uint64_t>(static_cast<std::uint64_t>(world),
                                                                   (collectives::kStatusWords - 1) * 64));
  for (int r = 0; r < recorded; ++r) {
    std::string& list = (status[1 + r / 64] >> (r % 64) & 1) != 0 ? lists.marked : lists.unmarked;
    list += (list.empty() ? "" : ", ") + std::to_string(r);
  }
  if (recorded < world) lists.unmarked += " (ranks from " + std::to_string(recorded) + " not recorded)";
  return lists;
}

// The error of a zero-copy call whose ranks laid out `in` and `out` differently, from the status
// words that detail/staged.h's agree_on_layout wrote on every rank.
Error layouts_differ(const std::string& who, const std::uint64_t* status, int world) {
  const MarkedRanks ranks = marked_ranks(status, world);
  return Error(ErrorCode::invalid_argument,
               who + ": the ranks laid out `in` and `out` differently, so they cannot run one algorithm: on rank(s) " +
                   ranks.marked + " `out` overlaps `in` (or holds it in place), on rank(s) " + ranks.unmarked +
                   " it does not. Give every rank the same layout (all disjoint, or all the same overlap), or call "
                   "the form without in_map");
}

// The error of a zero-copy call whose ranks passed their symmetric input at different offsets in
// its allocation (the marked ranks' offset is not rank 0's, or a broadcast root's).
Error offsets_differ(const std::string& who, const std::uint64_t* status, int world) {
  const MarkedRanks ranks = marked_ranks(status, world);
  return Error(ErrorCode::invalid_argument,
               who + ": the ranks passed the symmetric input at different places of its allocation: on rank(s) " +
                   ranks.marked + " it lies at another offset than on rank(s) " + ranks.unmarked +
                   " (rank 0's offset; a broadcast's: root's). A rank reads each peer's input at its own offset, so "
                   "every rank must pass the same offset (the same tensor of one symmetric allocation); or call the "
                   "form without in_map");
}

// The error of a zero-copy broadcast whose root gave an `out` overlapping its `in` (status word 1).
Error root_overlaps(const std::string& who, const std::uint64_t* status) {
  return Error(ErrorCode::invalid_argument,
               who + ": on root " + std::to_string(status[1]) + " `out` overlaps `in` without being it, so root's " +
                   "copy would overwrite what the other ranks still read; give out == in (in place) or buffers apart");
}

// True when status word 0 says every rank refused a zero-copy call before anything moved.
bool refused(std::uint64_t what) {
  return what == collectives::kStatusLayoutsDiffer || what == collectives::kStatusRootOverlaps ||
         what == collectives::kStatusOffsetsDiffer;
}

// The error of such a refusal, from the status words; the host and check() throw the same.
Error refusal_error(const std::string& who, const std::uint64_t* status, int world) {
  if (status[0] == collectives::kStatusRootOverlaps) return root_overlaps(who, status);
  if (status[0] == collectives::kStatusOffsetsDiffer) return offsets_differ(who, status, world);
  return layouts_differ(who, status, world);
}

}  // namespace

void Communicator::check_layouts(const char* call) {
  if (kind_ != MemoryKind::host || !refused(call_handle_.status[0])) return;
  std::uint64_t status[collectives::kStatusWords];
  std::memcpy(status, call_handle_.status, sizeof status);
  std::memset(call_handle_.status, 0, sizeof status);  // the call failed on every rank; the next may run
  throw refusal_error(std::string("Communicator::") + call + " (symmetric input)", status, size());
}

void Communicator::all_gather(const void* in, const SymmetricAddressMap& in_map, void* out, std::size_t count,
                              DataType type, Stream stream) {
  if (hierarchy_) return all_gather(in, out, count, type, stream);  // across nodes: the staged form
  const std::size_t bytes = count * size_of(type);
  if (uses_ll(bytes)) return all_gather(in, out, count, type, stream);
  check_call("all_gather", count, type, false, stream, count, count * size(), in, out);
  Call c{Kind::all_gather_direct, in, out, count, type, ReduceOp::sum, 0};
  c.in_bases = symmetric_input("all_gather", in_map, in, bytes);
  APERTURE_COLLECTIVE_RUN(c, bytes * size(), bytes);
  check_layouts("all_gather");
}

void Communicator::reduce_scatter(const void* in, const SymmetricAddressMap& in_map, void* out, std::size_t count,
                                  DataType type, ReduceOp op, Stream stream) {
  if (hierarchy_) return reduce_scatter(in, out, count, type, op, stream);
  const std::size_t bytes = count * size_of(type) * size();
  if (uses_ll(bytes)) return reduce_scatter(in, out, count, type, op, stream);
  check_op("reduce_scatter", op);
  check_call("reduce_scatter", count, type, true, stream, count * size(), count, in, out);
  Call c{Kind::reduce_scatter_direct, in, out, count, type, op, 0};
  c.in_bases = symmetric_input("reduce_scatter", in_map, in, bytes);
  APERTURE_COLLECTIVE_RUN(c, bytes, bytes);
  check_layouts("reduce_scatter");
}

void Communicator::all_reduce(const void* in, const SymmetricAddressMap& in_map, void* out, std::size_t count,
                              DataType type, ReduceOp op, AllReduceAlgorithm algorithm, Stream stream) {
  if (hierarchy_) return all_reduce(in, out, count, type, op, algorithm, stream);
  const std::size_t bytes = count * size_of(type);
  if (algorithm == AllReduceAlgorithm::automatic) algorithm = choose_all_reduce(bytes);
  if (algorithm == AllReduceAlgorithm::ll) return all_reduce(in, out, count, type, op, algorithm, stream);
  check_op("all_reduce", op);
  check_call("all_reduce", count, type, true, stream, count, count, in, out);
  const Kind kind = algorithm == AllReduceAlgorithm::two_shot ? Kind::all_reduce_two_shot_direct : Kind::all_reduce_direct;
  Call c{kind, in, out, count, type, op, 0};
  c.in_bases = symmetric_input("all_reduce", in_map, in, bytes);
  APERTURE_COLLECTIVE_RUN(c, bytes, bytes);
  check_layouts("all_reduce");
}

void Communicator::all_to_all(const void* in, const SymmetricAddressMap& in_map, void* out, std::size_t count,
                              DataType type, Stream stream) {
  if (hierarchy_) return all_to_all(in, out, count, type, stream);
  const std::size_t bytes = count * size_of(type) * size();
  if (bytes < all_to_all_direct_min_bytes_) return all_to_all(in, out, count, type, stream);
  check_call("all_to_all", count, type, false, stream, count * size(), count * size(), in, out);
  Call c{Kind::all_to_all_direct, in, out, count, type, ReduceOp::sum, 0};
  c.in_bases = symmetric_input("all_to_all", in_map, in, bytes);
  APERTURE_COLLECTIVE_RUN(c, bytes, bytes);
  check_layouts("all_to_all");
}

void Communicator::broadcast(const void* in, const SymmetricAddressMap& in_map, void* out, std::size_t count,
                             DataType type, int root, Stream stream) {
  const std::size_t bytes = count * size_of(type);
  if (hierarchy_ || broadcast_uses_ll(bytes) || bytes < broadcast_direct_min_bytes_)
    return broadcast(in, out, count, type, root, stream);
  check_root("broadcast", root);
  check_call("broadcast", count, type, false, stream, rank() == root ? count : 0, count, in, out);
  // Every rank's `in` is checked: peers read root's at the offset of their own.
  Call c{Kind::broadcast_direct, in, out, count, type, ReduceOp::sum, root};
  c.in_bases = symmetric_input("broadcast", in_map, in, bytes);
  APERTURE_COLLECTIVE_RUN(c, bytes, bytes);
  check_layouts("broadcast");
}

void Communicator::all_to_all(const void* in, void* out, std::size_t count, DataType type, Stream stream) {
  check_call("all_to_all", count, type, false, stream, count * size(), count * size(), in, out);
  if (hierarchy_) return hierarchy_->all_to_all(in, out, count, type, stream);
  Call c{Kind::all_to_all, in, out, count, type, ReduceOp::sum, 0};
  APERTURE_COLLECTIVE_RUN(c, count * size_of(type) * size(), count * size_of(type) * size());
}

#undef APERTURE_COLLECTIVE_RUN

void Communicator::check(Stream stream) {
  if (kind_ != MemoryKind::device) return;
  // Across nodes, the stream is waited for by polling, so that a failure between nodes (a lost
  // rank) is thrown as soon as it is known (Hierarchy::sync); the status read below then finds
  // the stream idle.
  if (hierarchy_) hierarchy_->sync(stream);
  std::uint64_t status[collectives::kStatusWords] = {};
  try {
    collectives::detail::device_read_status(handle_, stream, status);
  } catch (const Error&) {
    // A stream that fails after the watch aborted the NCCL exchanges (NCCL's kernels ended
    // unfinished): the abort's cause, a lost rank, is the error to report.
    if (hierarchy_) hierarchy_->check();
    throw;
  }
  // Across nodes, a kernel that gave up because the job failed (the cancel word): that failure,
  // naming the lost rank, rather than a timeout.
  if (status[0] == collectives::kStatusWaitGaveUp && hierarchy_) hierarchy_->check();
  if (refused(status[0]))
    throw refusal_error("Communicator (rank " + std::to_string(rank()) + ", provider " + std::string(provider_.name()) +
                            "): a zero-copy collective (a form with in_map) failed on every rank; results since are invalid",
                        status, size());
  if (status[0] != 0)
    throw Error(ErrorCode::timeout, "Communicator (rank " + std::to_string(rank()) + ", provider " + std::string(provider_.name()) +
                "): a collective kernel's wait gave up after APERTURE_TIMEOUT (" +
                std::to_string(static_cast<double>(handle_.timeout_ns) / 1e9) +
                " s): a peer rank did not make the same collective call, or failed; results since are invalid");
}

}  // namespace aperture
