// tests/install/consumer.cpp — the public contract (docs/CONTRACT.md), used from outside.
//
//   consumer PROVIDER [PROVIDER...]   run under `aperture launch -n N` (or --mpi), any N
//   consumer --available              print available_providers(), one per line, and exit
//
// Built against an installed prefix only, this program touches every name the contract
// promises: Team::from_env and its collectives, make_provider, available_providers, Provider,
// Allocation, SymmetricAddressMap, Error, and translate, load, store, put, get, copy, every
// atomic with explicit orders and scopes, signal and wait_until_ge. Given two providers it
// allocates from both and uses both in the same loops, each through its own table. Every rank
// writes values that differ by rank, element and provider, and every element is checked.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <aperture/aperture.h>

namespace {

constexpr int kCount = 4096;  // elements per array: more than a page of int64_t
constexpr int kMaxRanks = 62;  // bit masks below use one bit per rank

// One symmetric block per provider. Fields other ranks write are never written locally after
// the first barrier.
struct Block {
  std::int64_t data[kCount];     // step 1: left neighbour stores here
  std::int64_t put_in[kCount];   // step 3: left neighbour put()s here
  std::int64_t copy_in[kCount];  // step 5: right neighbour copy()s here
  std::uint64_t flags[4];        // one flag per step, so no step can see another's signal
  // step 6: rank 0's copies are updated by every rank
  std::int64_t sum;
  std::int64_t negative_sum;
  std::uint64_t or_bits;
  std::uint64_t and_bits;
  std::uint32_t xor_bits;
  std::int32_t min_seen;
  std::int32_t max_seen;
  std::int64_t last_swapped;
  std::int32_t claimed_by;  // 0: free; r + 1: rank r won the compare-and-swap
  double weight;
  float weight_f;
};

struct Checker {
  int rank = 0;
  int failures = 0;
  int checks = 0;
  void expect(bool ok, const char* what, long long got = 0, long long want = 0) {
    ++checks;
    if (!ok && failures++ < 20) std::fprintf(stderr, "rank %d: FAILED %s (got %lld, want %lld)\n", rank, what, got, want);
  }
};

// Distinct for every rank, element and provider, so a wrong peer, offset or table shows.
std::int64_t value(int rank, int i, int provider) {
  return (std::int64_t{rank} + 1) * 100'000'000 + std::int64_t{provider} * 1'000'000 + i;
}

struct Used {
  std::unique_ptr<aperture::Provider> provider;
  aperture::Allocation allocation;
  Block* block = nullptr;
  const std::int64_t* bases = nullptr;  // the table kernels (here: this CPU code) use
};

bool contains(const std::vector<std::string>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

void check_team(aperture::Team& team, Checker& c) {
  const int me = team.rank(), n = team.size();
  c.expect(n >= 1 && me >= 0 && me < n, "Team rank/size in range", me, n);
  c.expect(team.local_size() >= 1 && team.local_size() <= n, "Team local_size", team.local_size(), n);
  c.expect(team.local_rank() >= 0 && team.local_rank() < team.local_size(), "Team local_rank", team.local_rank(),
           team.local_size());
  // One machine: every rank is local.
  c.expect(team.local_size() == n, "Team local_size == size on one machine", team.local_size(), n);

  struct Card {
    std::int32_t rank;
    std::int32_t local_rank;
    std::int64_t token;
  };
  const Card mine{me, team.local_rank(), value(me, 7, 9)};
  std::vector<Card> all(static_cast<std::size_t>(n));
  team.allgather(&mine, all.data(), sizeof(Card));
  std::vector<int> local_ranks;
  for (int r = 0; r < n; ++r) {
    c.expect(all[r].rank == r, "allgather: rank order", all[r].rank, r);
    c.expect(all[r].token == value(r, 7, 9), "allgather: payload", all[r].token, value(r, 7, 9));
    local_ranks.push_back(all[r].local_rank);
  }
  std::sort(local_ranks.begin(), local_ranks.end());
  for (int r = 0; r < n; ++r) c.expect(local_ranks[r] == r, "local ranks are 0..local_size-1", local_ranks[r], r);

  const int root = n - 1;
  std::int64_t payload[3] = {-1, -1, -1};
  if (me == root) payload[0] = 11, payload[1] = value(root, 1, 2), payload[2] = 13;
  team.broadcast(payload, sizeof payload, root);
  c.expect(payload[0] == 11 && payload[1] == value(root, 1, 2) && payload[2] == 13, "broadcast from the last rank",
           payload[1], value(root, 1, 2));
  team.barrier();
}

void check_map(const Used& u, const aperture::Team& team, std::size_t bytes, Checker& c) {
  const aperture::Allocation& a = u.allocation;
  const aperture::SymmetricAddressMap& m = a.map;
  const int me = team.rank(), n = team.size();
  const auto base = reinterpret_cast<std::uintptr_t>(a.ptr);
  c.expect(a.ptr != nullptr, "Allocation::ptr is set");
  c.expect(a.bytes >= bytes, "Allocation::bytes covers the request", static_cast<long long>(a.bytes),
           static_cast<long long>(bytes));
  c.expect(base % 256 == 0, "Allocation::ptr honours the alignment", static_cast<long long>(base % 256), 0);
  c.expect(m.local_rank == me, "map.local_rank", m.local_rank, me);
  c.expect(m.world_size == n, "map.world_size", m.world_size, n);
  c.expect(m.allocation_base == base, "map.allocation_base == ptr");
  c.expect(m.allocation_bytes >= bytes, "map.allocation_bytes", static_cast<long long>(m.allocation_bytes),
           static_cast<long long>(bytes));
  const std::span<const std::int64_t> host = m.host_peer_bases();
  c.expect(host.size() == static_cast<std::size_t>(n), "host_peer_bases has world_size entries",
           static_cast<long long>(host.size()), n);
  c.expect(host[static_cast<std::size_t>(me)] == static_cast<std::int64_t>(base), "host_peer_bases()[me] == base");
  c.expect(m.peer_bases() != nullptr, "peer_bases() is set");
  // Host providers: kernels are CPU code, so the table is the host table.
  for (int r = 0; r < n; ++r)
    c.expect(m.peer_bases()[r] == host[static_cast<std::size_t>(r)], "peer_bases() == host_peer_bases() on the host");
  c.expect(m.all_direct(), "all_direct on one machine");
  c.expect(m.indirect_peers().empty(), "indirect_peers empty on one machine",
           static_cast<long long>(m.indirect_peers().size()), 0);
  for (int r = 0; r < n; ++r) c.expect(m.is_direct(r), "is_direct(r)", r);
  c.expect(!m.is_direct(n) && !m.is_direct(-1), "is_direct is false outside the team");
  c.expect(m.owns(a.ptr), "owns(ptr)");
  c.expect(m.owns(a.ptr, bytes), "owns(ptr, bytes)");
  c.expect(!m.owns(static_cast<const char*>(a.ptr) + m.allocation_bytes, 1), "!owns(one past the end)");
  c.expect(!m.owns(static_cast<const char*>(a.ptr) - 1, 1), "!owns(one before the start)");
  c.expect(!m.owns(a.ptr, m.allocation_bytes + 1), "!owns(a range longer than the allocation)");

  // A view: describing the middle of the allocation gives a table that translates the view.
  const std::int64_t* view_ptr = &u.block->data[kCount / 2];
  const aperture::SymmetricAddressMap v = u.provider->symmetric_address_map(view_ptr, sizeof(std::int64_t) * 16);
  c.expect(v.local_rank == me && v.world_size == n, "view map: rank and size");
  c.expect(v.allocation_base == reinterpret_cast<std::uintptr_t>(view_ptr), "view map: base is the view");
  c.expect(v.allocation_bytes >= sizeof(std::int64_t) * 16, "view map: bytes");
  for (int r = 0; r < n; ++r) {
    const std::int64_t* via_view = aperture::translate(view_ptr + 3, me, r, v.host_peer_bases().data());
    const std::int64_t* via_alloc = aperture::translate(view_ptr + 3, me, r, m.host_peer_bases().data());
    c.expect(via_view == via_alloc, "a view's table translates like its allocation's", r);
  }
  // Memory the provider does not own is refused with aperture::Error.
  std::int64_t not_symmetric = 0;
  bool threw = false;
  try {
    (void)u.provider->symmetric_address_map(&not_symmetric, sizeof not_symmetric);
  } catch (const aperture::Error& e) {
    threw = std::strlen(e.what()) > 0;
  }
  c.expect(threw, "symmetric_address_map(stack memory) throws aperture::Error");
}

void check_rma(std::vector<Used>& used, aperture::Team& team, Checker& c) {
  const int me = team.rank(), n = team.size();
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  const int m = static_cast<int>(used.size());

  // Step 1: store into the right neighbour, every provider in the same loop; then signal.
  for (int i = 0; i < kCount; ++i)
    for (int j = 0; j < m; ++j) aperture::store(&used[j].block->data[i], value(me, i, j), me, right, used[j].bases);
  for (int j = 0; j < m; ++j) aperture::signal(&used[j].block->flags[0], 1, me, right, used[j].bases);
  for (int j = 0; j < m; ++j) {
    const std::uint64_t seen = aperture::wait_until_ge(&used[j].block->flags[0], 1);
    c.expect(seen >= 1, "wait_until_ge returns the value it saw", static_cast<long long>(seen), 1);
  }
  int wrong = 0;
  for (int i = 0; i < kCount; ++i)
    for (int j = 0; j < m; ++j) wrong += used[j].block->data[i] != value(left, i, j);
  c.expect(wrong == 0, "store: every element came from the left neighbour", wrong, 0);
  team.barrier();

  // Step 2: load back what this rank stored into the right neighbour.
  wrong = 0;
  for (int i = 0; i < kCount; ++i)
    for (int j = 0; j < m; ++j) wrong += aperture::load(&used[j].block->data[i], me, right, used[j].bases) != value(me, i, j);
  c.expect(wrong == 0, "load: the right neighbour holds what this rank stored", wrong, 0);

  // Step 3: put this rank's data of provider j into the right neighbour's put_in of provider
  // j+1: source and destination belong to different providers when there are two.
  for (int j = 0; j < m; ++j) {
    const int k = (j + 1) % m;
    aperture::put(&used[k].block->put_in[0], &used[j].block->data[0], kCount, me, right, used[k].bases);
    aperture::signal(&used[k].block->flags[1], 1, me, right, used[k].bases);
  }
  for (int k = 0; k < m; ++k) aperture::wait_until_ge(&used[k].block->flags[1], 1);
  const int left2 = (me + 2 * n - 2) % n;  // whose values the left neighbour received in step 1
  wrong = 0;
  for (int k = 0; k < m; ++k) {
    const int j = (k + m - 1) % m;
    for (int i = 0; i < kCount; ++i) wrong += used[k].block->put_in[i] != value(left2, i, j);
  }
  c.expect(wrong == 0, "put: every element is the left neighbour's data of the other provider", wrong, 0);

  // Step 4: get the right neighbour's data (which this rank stored in step 1) into private memory.
  std::vector<std::int64_t> got(kCount, -1);
  for (int j = 0; j < m; ++j) {
    aperture::get(got.data(), &used[j].block->data[0], kCount, me, right, used[j].bases);
    wrong = 0;
    for (int i = 0; i < kCount; ++i) wrong += got[i] != value(me, i, j);
    c.expect(wrong == 0, "get: the right neighbour's data", wrong, 0);
  }
  // A get of part of the array, from the middle: views translate by the same offset.
  std::fill(got.begin(), got.end(), -1);
  aperture::get(got.data(), &used[0].block->data[100], 50, me, left, used[0].bases);
  wrong = 0;
  for (int i = 0; i < 50; ++i) wrong += got[i] != value(left2, 100 + i, 0);
  c.expect(wrong == 0 && got[50] == -1, "get of a view copies exactly its range", wrong, 0);

  // Step 5: a third-party copy: from the right neighbour's data into the left neighbour's copy_in.
  for (int j = 0; j < m; ++j) {
    aperture::copy(&used[j].block->copy_in[0], &used[j].block->data[0], kCount, /*src_rank=*/right,
                   /*dst_rank=*/left, /*cur_rank=*/me, used[j].bases);
    aperture::signal(&used[j].block->flags[2], 1, me, left, used[j].bases);
  }
  for (int j = 0; j < m; ++j) aperture::wait_until_ge(&used[j].block->flags[2], 1);
  // This rank's copy_in was written by its right neighbour, from that rank's right neighbour's
  // data, which holds the values the right neighbour stored there: value(right, i, j).
  wrong = 0;
  for (int j = 0; j < m; ++j)
    for (int i = 0; i < kCount; ++i) wrong += used[j].block->copy_in[i] != value(right, i, j);
  c.expect(wrong == 0, "copy: third-party copy from right to left neighbour", wrong, 0);
  team.barrier();
}

void check_atomics(std::vector<Used>& used, aperture::Team& team, Checker& c) {
  using aperture::order;
  using aperture::scope;
  const int me = team.rank(), n = team.size();
  for (auto& u : used) {
    Block* b = u.block;
    b->sum = 0;
    b->negative_sum = 0;
    b->or_bits = 0;
    b->and_bits = ~std::uint64_t{0};
    b->xor_bits = 0;
    b->min_seen = 1'000'000;
    b->max_seen = -1;
    b->last_swapped = 0;
    b->claimed_by = 0;
    b->weight = 0.0;
    b->weight_f = 0.0f;
  }
  team.barrier();  // rank 0's fields are initialised before anyone updates them

  std::vector<std::int64_t> swapped_out(used.size());
  std::vector<std::int32_t> won(used.size());
  for (std::size_t j = 0; j < used.size(); ++j) {
    Block* b = used[j].block;
    const std::int64_t* t = used[j].bases;
    for (int round = 0; round < 100; ++round) {
      aperture::atomic_add(&b->sum, std::int64_t{me + 1}, me, 0, t, order::relaxed, scope::system);
      aperture::atomic_sub(&b->negative_sum, std::int64_t{me + 1}, me, 0, t, order::acq_rel, scope::system);
    }
    aperture::atomic_or(&b->or_bits, std::uint64_t{1} << me, me, 0, t, order::release, scope::system);
    aperture::atomic_and(&b->and_bits, ~(std::uint64_t{1} << me), me, 0, t, order::seq_cst, scope::system);
    aperture::atomic_xor(&b->xor_bits, static_cast<std::uint32_t>(me + 1), me, 0, t, order::acq_rel, scope::device);
    aperture::atomic_min(&b->min_seen, std::int32_t{me + 10}, me, 0, t, order::acquire, scope::system);
    aperture::atomic_max(&b->max_seen, std::int32_t{me + 10}, me, 0, t);  // defaults: acq_rel, system
    swapped_out[j] = aperture::atomic_xchg(&b->last_swapped, value(me, 0, static_cast<int>(j)), me, 0, t,
                                           order::acq_rel, scope::system);
    const std::int32_t found =
        aperture::atomic_cas(&b->claimed_by, std::int32_t{0}, std::int32_t{me + 1}, me, 0, t, order::acq_rel, scope::system);
    won[j] = found == 0 ? 1 : 0;
    aperture::atomic_add(&b->weight, 0.5 * (me + 1), me, 0, t, order::relaxed, scope::block);
    aperture::atomic_add(&b->weight_f, 0.25f, me, 0, t);
  }
  team.barrier();

  for (std::size_t j = 0; j < used.size(); ++j) {
    // Everyone reads rank 0's results through the table: remote loads after the barrier.
    Block* b = used[j].block;
    const std::int64_t* t = used[j].bases;
    const std::int64_t tri = std::int64_t{n} * (n + 1) / 2;
    std::uint32_t xor_want = 0;
    for (int r = 0; r < n; ++r) xor_want ^= static_cast<std::uint32_t>(r + 1);
    const std::uint64_t all_bits = n == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << n) - 1;
    c.expect(aperture::load(&b->sum, me, 0, t) == 100 * tri, "atomic_add (int64, relaxed)",
             aperture::load(&b->sum, me, 0, t), 100 * tri);
    c.expect(aperture::load(&b->negative_sum, me, 0, t) == -100 * tri, "atomic_sub",
             aperture::load(&b->negative_sum, me, 0, t), -100 * tri);
    c.expect(aperture::load(&b->or_bits, me, 0, t) == all_bits, "atomic_or");
    c.expect(aperture::load(&b->and_bits, me, 0, t) == ~all_bits, "atomic_and");
    c.expect(aperture::load(&b->xor_bits, me, 0, t) == xor_want, "atomic_xor", aperture::load(&b->xor_bits, me, 0, t),
             xor_want);
    c.expect(aperture::load(&b->min_seen, me, 0, t) == 10, "atomic_min", aperture::load(&b->min_seen, me, 0, t), 10);
    c.expect(aperture::load(&b->max_seen, me, 0, t) == n + 9, "atomic_max", aperture::load(&b->max_seen, me, 0, t),
             n + 9);
    c.expect(aperture::load(&b->weight, me, 0, t) == 0.5 * static_cast<double>(tri), "atomic_add (double)");
    c.expect(aperture::load(&b->weight_f, me, 0, t) == 0.25f * static_cast<float>(n), "atomic_add (float)");

    // xchg: the values swapped out, plus the one left, are 0 and every rank's value exactly once.
    std::vector<std::int64_t> outs(static_cast<std::size_t>(n));
    team.allgather(&swapped_out[j], outs.data(), sizeof(std::int64_t));
    outs.push_back(aperture::load(&b->last_swapped, me, 0, t));
    std::sort(outs.begin(), outs.end());
    std::vector<std::int64_t> want{0};
    for (int r = 0; r < n; ++r) want.push_back(value(r, 0, static_cast<int>(j)));
    std::sort(want.begin(), want.end());
    c.expect(outs == want, "atomic_xchg: a chain through every rank's value");

    // cas: exactly one rank won, and the slot names it.
    std::vector<std::int32_t> wins(static_cast<std::size_t>(n));
    team.allgather(&won[j], wins.data(), sizeof(std::int32_t));
    int winners = 0, winner = -1;
    for (int r = 0; r < n; ++r)
      if (wins[r]) ++winners, winner = r;
    c.expect(winners == 1, "atomic_cas: exactly one winner", winners, 1);
    c.expect(aperture::load(&b->claimed_by, me, 0, t) == winner + 1, "atomic_cas: the slot names the winner",
             aperture::load(&b->claimed_by, me, 0, t), winner + 1);
  }
  team.barrier();
}

int run(const std::vector<std::string>& names) {
  aperture::Team team = aperture::Team::from_env();  // outlives every provider below
  Checker c;
  c.rank = team.rank();
  const int n = team.size();
  if (n > kMaxRanks) {
    std::fprintf(stderr, "consumer handles up to %d ranks\n", kMaxRanks);
    return 2;
  }
  check_team(team, c);

  const std::vector<std::string> available = aperture::available_providers();
  for (const auto& name : names) c.expect(contains(available, name), ("available_providers() lists " + name).c_str());

  // Unknown names are refused with aperture::Error (which is a std::runtime_error).
  bool threw = false;
  try {
    (void)aperture::make_provider("no-such-provider", team);
  } catch (const aperture::Error& e) {
    const std::runtime_error& as_runtime_error = e;
    threw = std::string_view(as_runtime_error.what()).find("no-such-provider") != std::string_view::npos;
  }
  c.expect(threw, "make_provider(unknown) throws aperture::Error naming it");

  {  // "default" is one of the real providers.
    auto fallback = aperture::make_provider("default", team);
    c.expect(fallback != nullptr && contains(available, std::string(fallback->name())), "default is an available provider");
  }

  std::vector<Used> used;
  const std::size_t bytes = sizeof(Block);
  for (std::size_t j = 0; j < names.size(); ++j) {
    Used u;
    u.provider = aperture::make_provider(names[j], team);
    c.expect(u.provider->name() == names[j], ("Provider::name() is " + names[j]).c_str());
    u.allocation = u.provider->allocate(bytes, 256);
    u.block = static_cast<Block*>(u.allocation.ptr);
    u.bases = u.allocation.map.peer_bases();
    // Nothing but this rank's own flags needs clearing; other ranks touch them after the barrier.
    std::memset(u.block->flags, 0, sizeof u.block->flags);
    used.push_back(std::move(u));
  }
  team.barrier();
  for (const auto& u : used) check_map(u, team, bytes, c);

  check_rma(used, team, c);
  check_atomics(used, team, c);

  for (auto& u : used) u.provider->free(u.allocation);  // collective, in the same order everywhere
  std::string list;
  for (const auto& name : names) list += (list.empty() ? "" : "+") + name;
  std::printf("consumer rank %d/%d [%s]: %d checks, %d failed\n", team.rank(), n, list.c_str(), c.checks, c.failures);
  return c.failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) try {
  std::vector<std::string> names(argv + 1, argv + argc);
  if (names.size() == 1 && names[0] == "--available") {
    for (const auto& name : aperture::available_providers()) std::printf("%s\n", name.c_str());
    return 0;
  }
  if (names.empty()) {
    std::fprintf(stderr, "usage: consumer PROVIDER [PROVIDER...] | consumer --available\n");
    return 2;
  }
  return run(names);
} catch (const aperture::Error& e) {
  std::fprintf(stderr, "consumer: aperture::Error: %s\n", e.what());
  return 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "consumer: %s\n", e.what());
  return 1;
}
