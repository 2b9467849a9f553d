// src/collectives/collective_kinds.h — the collective kinds the library runs: one table, and
// what is made from it (Kind, each kind's traits, and the one switch from a Kind to code
// compiled for it; run_collective.h makes the algorithm calls from the same rows).
//
// To add a collective: add its row here, and the Communicator method that makes its Call
// (communicator.cpp). The CPU code (host.cpp), the kernels and their launch (device.cu) and the
// per-type reductions follow from the row. Columns:
//   kind    the Kind enumerator
//   shape   barrier; movement (copies elements: depends on their size only, one instantiation
//           per size); or reduction (combines them: one per element type and ReduceOp)
//   path    staged (through the staging halves), ll (the push path, detail/ll.h: its own block
//           count), or direct (zero-copy on a symmetric input, detail/staged.h)
//   gpu     whether it runs on GPU memory (false: host memory only, no kernel is compiled)
//   label   its name in messages
//   call    the algorithm (aperture/collectives/*.h), called with g (the Coop), h (the handle),
//           c (the Call), in and out (the buffers as T) and Op (the ReduceOp)
#pragma once

#include "aperture/collectives/types.h"
#include "aperture/error.h"

// clang-format off
#define APERTURE_COLLECTIVE_KINDS(X)                                                                                     \
  X(barrier,                    barrier,   staged, true,  "barrier",                       barrier(g, h))                                                     \
  X(broadcast,                  movement,  staged, true,  "broadcast",                     broadcast(g, h, in, out, c.count, c.root))                         \
  X(broadcast_ll,               movement,  ll,     false, "broadcast (ll)",                broadcast_ll(g, h, in, out, c.count, c.root))                      \
  X(all_gather,                 movement,  staged, true,  "all_gather",                    all_gather(g, h, in, out, c.count))                                \
  X(reduce_scatter,             reduction, staged, true,  "reduce_scatter",                reduce_scatter<Op>(g, h, in, out, c.count))                        \
  X(all_reduce_one_shot,        reduction, staged, true,  "all_reduce (one-shot)",         all_reduce_one_shot<Op>(g, h, in, out, c.count))                   \
  X(all_reduce_two_shot,        reduction, staged, true,  "all_reduce (two-shot)",         all_reduce_two_shot<Op>(g, h, in, out, c.count))                   \
  X(all_to_all,                 movement,  staged, true,  "all_to_all",                    all_to_all(g, h, in, out, c.count))                                \
  X(all_gather_ll,              movement,  ll,     true,  "all_gather (ll)",               all_gather_ll(g, h, in, out, c.count))                             \
  X(reduce_scatter_ll,          reduction, ll,     true,  "reduce_scatter (ll)",           reduce_scatter_ll<Op>(g, h, in, out, c.count))                     \
  X(all_reduce_ll,              reduction, ll,     true,  "all_reduce (ll)",               all_reduce_ll<Op>(g, h, in, out, c.count))                         \
  X(all_gather_direct,          movement,  direct, true,  "all_gather (direct)",           all_gather_direct(g, h, in, c.in_bases, out, c.count))             \
  X(reduce_scatter_direct,      reduction, direct, true,  "reduce_scatter (direct)",       reduce_scatter_direct<Op>(g, h, in, c.in_bases, out, c.count))     \
  X(all_reduce_direct,          reduction, direct, true,  "all_reduce (direct)",           all_reduce_direct<Op>(g, h, in, c.in_bases, out, c.count))         \
  X(all_reduce_two_shot_direct, reduction, direct, true,  "all_reduce (two-shot, direct)", all_reduce_two_shot_direct<Op>(g, h, in, c.in_bases, out, c.count)) \
  X(all_to_all_direct,          movement,  direct, true,  "all_to_all (direct)",           all_to_all_direct(g, h, in, c.in_bases, out, c.count))             \
  X(broadcast_direct,           movement,  direct, true,  "broadcast (direct)",            broadcast_direct(g, h, in, c.in_bases, out, c.count, c.root))
// clang-format on

namespace aperture::collectives::detail {

#define APERTURE_KIND_ENUMERATOR(kind, shape, path, gpu, label, call) kind,
enum class Kind { APERTURE_COLLECTIVE_KINDS(APERTURE_KIND_ENUMERATOR) };
#undef APERTURE_KIND_ENUMERATOR

enum class Shape { barrier, movement, reduction };
enum class Path { staged, ll, direct };

struct KindRow {
  Shape shape;
  Path path;
  bool gpu;
  const char* label;
};

#define APERTURE_KIND_ROW(kind, shape, path, gpu, label, call) KindRow{Shape::shape, Path::path, gpu, label},
inline constexpr KindRow kKinds[] = {APERTURE_COLLECTIVE_KINDS(APERTURE_KIND_ROW)};
#undef APERTURE_KIND_ROW

constexpr const KindRow& row_of(Kind k) { return kKinds[static_cast<int>(k)]; }
constexpr bool moves_data(Kind k) { return row_of(k).shape == Shape::movement; }
constexpr bool reduces(Kind k) { return row_of(k).shape == Shape::reduction; }
constexpr bool is_ll(Kind k) { return row_of(k).path == Path::ll; }
constexpr bool runs_on_gpu(Kind k) { return row_of(k).gpu; }
constexpr const char* label_of(Kind k) { return row_of(k).label; }

// Calls f.template operator()<K>() with K = k: [&]<Kind K>() { ... }.
template <class F>
void visit_kind(Kind k, F&& f) {
  switch (k) {
#define APERTURE_KIND_CASE(kind, shape, path, gpu, label, call) \
  case Kind::kind: f.template operator()<Kind::kind>(); return;
    APERTURE_COLLECTIVE_KINDS(APERTURE_KIND_CASE)
#undef APERTURE_KIND_CASE
  }
  throw Error(ErrorCode::internal, "collectives: internal: not a collective kind");
}

}  // namespace aperture::collectives::detail
