// The "shm" provider: aperture's own symmetric heap in host shared memory.
//
// Each rank backs its heap with an anonymous memfd (sparse: pages exist only once touched) and
// every rank of the same machine maps every peer's memfd, opened through /proc/<pid>/fd. There is
// never a name in /dev/shm, so a crashed rank can leave nothing behind, and the kernel only lets
// a process of the same user open another's /proc/<pid>/fd. Allocation offsets are identical on
// every rank (SymmetricHeap is deterministic), so one table serves every allocation.
#include <sys/mman.h>
#include <unistd.h>
#include <fcntl.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "aperture/error.h"
#include "aperture/provider.h"
#include "aperture/team.h"
#include "detail/format.h"
#include "providers/provider_common.h"
#include "providers/registry.h"
#include "providers/symmetric_heap.h"

namespace aperture::detail {

namespace {

constexpr std::size_t kDefaultHeapBytes = std::size_t{1} << 30;
// Heaps are mapped at this alignment so that any alignment up to it holds for addresses, not
// only for offsets.
constexpr std::size_t kHeapAlignment = std::size_t{2} << 20;

std::string errno_text() { return detail::format("{} (errno {})", std::strerror(errno), errno); }

// Maps `fd` (length `bytes`) shared, at an address aligned to kHeapAlignment.
void* map_aligned(int fd, std::size_t bytes) {
  const std::size_t span = bytes + kHeapAlignment;
  void* reserved = ::mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserved == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<std::uintptr_t>(reserved);
  const std::uintptr_t aligned = (start + kHeapAlignment - 1) / kHeapAlignment * kHeapAlignment;
  void* heap = ::mmap(reinterpret_cast<void*>(aligned), bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
  if (heap == MAP_FAILED) {
    ::munmap(reserved, span);
    return nullptr;
  }
  // Give back the unused ends of the reservation.
  if (aligned > start) ::munmap(reserved, aligned - start);
  const std::uintptr_t tail = aligned + bytes;
  if (start + span > tail) ::munmap(reinterpret_cast<void*>(tail), start + span - tail);
  return heap;
}

class ShmProvider final : public Provider {
 public:
  explicit ShmProvider(Team& team)
      : team_(team), heap_bytes_(size_from_env("APERTURE_HEAP_SIZE", kDefaultHeapBytes)), heap_(heap_bytes_) {
    team_.check_same("shm provider start", {{"heap_bytes", heap_bytes_}});
    memfd_ = ::memfd_create("aperture-shm-heap", MFD_CLOEXEC);
    if (memfd_ < 0) throw Error("shm: memfd_create failed: " + errno_text());
    bases_.assign(team_.size(), 0);
    // Everything from here on is undone by the destructor if a later step throws.
    struct Cleanup {
      ShmProvider* self;
      bool armed = true;
      ~Cleanup() { if (armed) self->release(); }
    } cleanup{this};

    std::string local_error;
    if (::ftruncate(memfd_, static_cast<off_t>(heap_bytes_)) != 0) {
      local_error = detail::format("ftruncate of the {}-byte heap failed: {}", heap_bytes_, errno_text());
    } else if (void* mine = map_aligned(memfd_, heap_bytes_); mine == nullptr) {
      local_error = detail::format("mmap of the {}-byte heap failed: {}; lower APERTURE_HEAP_SIZE", heap_bytes_, errno_text());
    } else {
      bases_[team_.rank()] = reinterpret_cast<std::int64_t>(mine);
    }
    agree_or_throw(team_, "shm", "creating its heap", local_error);

    struct Published {
      std::int64_t pid;
      std::int64_t fd;
    };
    const Published me{static_cast<std::int64_t>(::getpid()), memfd_};
    std::vector<Published> everyone(team_.size());
    team_.allgather(&me, everyone.data(), sizeof me);
    for (int r = 0; r < team_.size() && local_error.empty(); ++r) {
      if (r == team_.rank() || !team_.same_node(r)) continue;  // another machine: not direct
      const std::string path = detail::format("/proc/{}/fd/{}", everyone[r].pid, everyone[r].fd);
      const int peer_fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
      if (peer_fd < 0) {
        local_error = detail::format("cannot open rank {}'s heap through {}: {}; ranks must run as the same user in the same "
                             "process namespace",
                             r, path, errno_text());
        break;
      }
      void* peer = map_aligned(peer_fd, heap_bytes_);
      ::close(peer_fd);
      if (peer == nullptr) {
        local_error = detail::format("mmap of rank {}'s {}-byte heap failed: {}; lower APERTURE_HEAP_SIZE", r, heap_bytes_,
                             errno_text());
        break;
      }
      bases_[r] = reinterpret_cast<std::int64_t>(peer);
    }
    agree_or_throw(team_, "shm", "mapping its peers' heaps", local_error);
    cleanup.armed = false;
  }

  ~ShmProvider() override { release(); }

  std::string_view name() const override { return "shm"; }
  MemoryKind memory_kind() const override { return MemoryKind::host; }
  bool is_linear() const override { return true; }

  Allocation allocate(std::size_t bytes, std::size_t alignment) override {
    // Compared before anything is refused: a rank with a bad request must fail every rank, not
    // leave the others waiting in the comparison until the timeout.
    team_.check_same("shm allocate", {{"bytes", bytes}, {"alignment", alignment}});
    check_allocation_request("shm", bytes, alignment);
    if (alignment > kHeapAlignment)
      throw Error(detail::format("shm allocate: alignment {} exceeds the largest the shm heap supports ({} bytes)", alignment,
                         kHeapAlignment));
    const auto offset = heap_.allocate(bytes, alignment);
    if (!offset)
      throw Error("shm allocate: the symmetric heap has " + heap_.describe_no_room(bytes, alignment) +
                  "; free allocations or raise APERTURE_HEAP_SIZE");
    Allocation allocation;
    allocation.ptr = reinterpret_cast<void*>(bases_[team_.rank()] + static_cast<std::int64_t>(*offset));
    allocation.bytes = bytes;
    allocation.map = map_for(*offset, bytes);
    return allocation;
  }

  void free(Allocation& allocation) override {
    // Checked here, then compared: every rank learns together whether the free is valid, so a
    // rank freeing something else (or twice) fails every rank instead of leaving them waiting.
    std::string local_error;
    std::size_t offset = 0;
    try {
      offset = offset_of(allocation.ptr, "free");
      const auto block = heap_.find(offset, 0);
      if (allocation.map.freed())  // a copy of an Allocation freed before, even if its address was reused since
        local_error = detail::format("shm free: the allocation at {} was already freed (through a copy of this "
                                     "Allocation); free each allocation once",
                                     allocation.ptr);
      else if (!block || block->first != offset)
        local_error = detail::format("shm free: {} is not a live allocation of this heap (freed twice, or a pointer "
                                     "into the middle of an allocation?)",
                                     allocation.ptr);
    } catch (const Error& e) {
      local_error = std::string(e.what()).substr(10);  // without "aperture: ", which Error adds again
    }
    constexpr std::uint64_t kInvalid = ~std::uint64_t{0};
    try {
      team_.check_same("shm free", {{"offset", local_error.empty() ? offset : kInvalid}, {"bytes", allocation.bytes}});
    } catch (const Error& mismatch) {
      if (local_error.empty()) throw;
      throw Error(local_error + "\n" + std::string(mismatch.what()).substr(10));
    }
    if (!local_error.empty()) throw Error(local_error);
    heap_.free(offset);
    allocation.map.mark_freed();  // every copy of this allocation's map now refuses the checked path
    allocation = Allocation{};
  }

  SymmetricAddressMap symmetric_address_map(const void* ptr, std::size_t bytes) const override {
    const std::size_t offset = offset_of(ptr, "symmetric_address_map");
    const auto block = heap_.find(offset, bytes);
    if (!block)
      throw Error(detail::format("shm symmetric_address_map: [{}, +{} bytes) is not inside a live allocation of this heap "
                         "(freed, or running past the end of its allocation)",
                         ptr, bytes));
    return map_for(offset, bytes);
  }

 private:

  std::size_t offset_of(const void* ptr, const char* call) const {
    const auto address = reinterpret_cast<std::uintptr_t>(ptr);
    const auto base = static_cast<std::uintptr_t>(bases_[team_.rank()]);
    if (ptr == nullptr || address < base || address >= base + heap_bytes_)
      throw Error(detail::format("shm {}: {} is not memory of this shm provider's heap [{:#x}, +{} bytes); was it allocated "
                         "by another provider?",
                         call, ptr, base, heap_bytes_));
    return address - base;
  }

  SymmetricAddressMap map_for(std::size_t offset, std::size_t bytes) const {
    std::vector<std::int64_t> table(bases_);
    for (auto& base : table)
      if (base != 0) base += static_cast<std::int64_t>(offset);
    return SymmetricAddressMap::from_table("shm", team_.rank(), std::move(table), bytes);
  }

  void release() {
    for (auto base : bases_)
      if (base != 0) ::munmap(reinterpret_cast<void*>(base), heap_bytes_);
    bases_.clear();
    if (memfd_ >= 0) ::close(memfd_);
    memfd_ = -1;
  }

  Team& team_;
  std::size_t heap_bytes_;
  SymmetricHeap heap_;
  int memfd_ = -1;
  std::vector<std::int64_t> bases_;  // where each rank's heap is mapped here; 0: not mapped
};

}  // namespace

ProviderEntry shm_entry() {
  ProviderEntry entry;
  entry.name = "shm";
  entry.status = [] {
    ProviderStatus status{"shm", true, false, {}};
    const int fd = ::memfd_create("aperture-probe", MFD_CLOEXEC);
    if (fd < 0) {
      status.reason = "memfd_create is not available: " + errno_text();
      return status;
    }
    const std::string path = detail::format("/proc/{}/fd/{}", ::getpid(), fd);
    const int again = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    ::close(fd);
    if (again < 0) {
      status.reason = detail::format("cannot reopen a memfd through {} (is /proc mounted?): {}", path, errno_text());
      return status;
    }
    ::close(again);
    status.available = true;
    status.reason = "host shared memory (memfd), ranks of one machine";
    return status;
  };
  entry.make = [](Team& team) -> std::unique_ptr<Provider> { return std::make_unique<ShmProvider>(team); };
  return entry;
}

}  // namespace aperture::detail
