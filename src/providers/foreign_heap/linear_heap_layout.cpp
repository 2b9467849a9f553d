#include "providers/foreign_heap/linear_heap_layout.h"

#include "aperture/error.h"
#include "common/format.h"
#include "providers/provider_common.h"

namespace aperture::detail {

void LinearHeapLayout::learn_and_verify(Team& team, Malloc malloc, Free free, const ProveStores& prove_stores) {
  const int n = team.size();
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(std::uint64_t);
  void* a = malloc(bytes);
  void* b = malloc(bytes);
  struct FreeBoth {  // collective; every rank leaves this function together (agree_or_throw)
    Free free;
    void* a;
    void* b;
    ~FreeBoth() {
      if (b) free(b);
      if (a) free(a);
    }
  } free_both{free, a, b};
  agree_or_throw(team, who_, "allocating two buffers to check the heap",
                 a && b ? std::string() : detail::format("allocating {} bytes returned NULL", bytes));
  std::vector<std::int64_t> table_b;
  agree_or_throw(team, who_, "checking that its heap is linear", learn(team.rank(), n, a, b, table_b));
  agree_or_throw(team, who_, "storing through its table", prove_stores(b, table_b));
}

std::string LinearHeapLayout::learn(int me, int n, const void* a, const void* b, std::vector<std::int64_t>& table_b) {
  direct_.assign(n, false);
  delta_.assign(n, 0);
  for (int p = 0; p < n; ++p) {
    if (void* peer_a = peer_pointer_(a, p)) {
      direct_[p] = true;
      delta_[p] = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(peer_a) - reinterpret_cast<std::uintptr_t>(a));
    }
  }
  table_b.assign(n, 0);
  if (!direct_[me] || delta_[me] != 0)
    return detail::format("{}(ptr, own PE {}) gave {} for {}; it must give the pointer itself", query_, me,
                          peer_pointer_(a, me), a);
  std::string error;
  for (int p = 0; p < n; ++p) {
    void* vouched = peer_pointer_(b, p);
    if (!direct_[p]) {
      if (vouched != nullptr)
        error += detail::format("\n  {} reaches rank {} for one allocation ({}) but not for another", query_, p, vouched);
      continue;
    }
    const auto translated = reinterpret_cast<std::uintptr_t>(b) + static_cast<std::uintptr_t>(delta_[p]);
    // Never store through a pointer the query does not vouch for.
    if (reinterpret_cast<std::uintptr_t>(vouched) != translated) {
      error += detail::format("\n  rank {}'s copy of a second allocation is at {} by {} but at {:#x} by the first "
                              "allocation's table",
                              p, vouched, query_, translated);
      continue;
    }
    table_b[p] = static_cast<std::int64_t>(translated);
  }
  if (!error.empty()) error = "the symmetric heap is not linear (one table cannot serve every allocation):" + error;
  return error;
}

std::vector<std::int64_t> LinearHeapLayout::table_of(const void* ptr) const {
  std::vector<std::int64_t> table(direct_.size(), 0);
  for (std::size_t p = 0; p < direct_.size(); ++p)
    if (direct_[p])
      table[p] = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(ptr) + static_cast<std::uintptr_t>(delta_[p]));
  return table;
}

std::vector<std::int64_t> LinearHeapLayout::table_of_foreign_range(const void* ptr, std::size_t bytes) const {
  const auto* first = static_cast<const unsigned char*>(ptr);
  const auto* last = bytes == 0 ? first : first + (bytes - 1);
  std::vector<std::int64_t> table(direct_.size(), 0);
  for (int p = 0; p < static_cast<int>(direct_.size()); ++p) {
    auto* peer_first = static_cast<const unsigned char*>(peer_pointer_(first, p));
    auto* peer_last = static_cast<const unsigned char*>(peer_pointer_(last, p));
    if (peer_first == nullptr) continue;
    if (peer_last != peer_first + (last - first))
      throw Error(ErrorCode::invalid_argument,
                  detail::format("{} symmetric_address_map: [{}, +{} bytes) is not mapped in one piece for rank {} ({} "
                                 "gives {} for its start and {} for its end); describe one allocation at a time",
                                 who_, ptr, bytes, p, query_, static_cast<const void*>(peer_first),
                                 static_cast<const void*>(peer_last)));
    table[p] = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(peer_first));
  }
  return table;
}

}  // namespace aperture::detail
