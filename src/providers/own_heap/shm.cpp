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
#include <exception>
#include <vector>

#include "aperture/error.h"
#include "aperture/provider.h"
#include "aperture/team.h"
#include "common/env.h"
#include "common/format.h"
#include "engines/engine_attachment.h"
#include "providers/own_heap/linear_heap_provider.h"
#include "providers/provider_common.h"
#include "providers/registry.h"

namespace aperture::detail {

namespace {

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

class ShmProvider final : public LinearHeapProvider {
 public:
  explicit ShmProvider(Team& team) : ShmProvider(team, env::heap_size()) {}

  ~ShmProvider() override { release(); }

  MemoryKind memory_kind() const override { return MemoryKind::host; }

 private:
  ShmProvider(Team& team, std::size_t heap_bytes)
      : LinearHeapProvider(team, HeapNames{"shm", "heap", "APERTURE_HEAP_SIZE"}, heap_bytes), heap_bytes_(heap_bytes) {
    team_.check_same("shm provider start", {{"heap_bytes", heap_bytes_}});
    memfd_ = ::memfd_create("aperture-shm-heap", MFD_CLOEXEC);
    if (memfd_ < 0) throw Error(ErrorCode::system, "shm: memfd_create failed: " + errno_text(), "memfd_create");
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
    // Ranks on other nodes reach this heap through MPI one-sided communication, when MPI
    // started the job (src/engines/engine.h); one window covers the whole heap.
    engine_ = EngineAttachment(
        open_engine_over_host_memory(team_, reinterpret_cast<void*>(bases_[team_.rank()]), heap_bytes_));
    cleanup.armed = false;
  }

  // Every heap is mapped at kHeapAlignment, so any alignment up to it holds for addresses.
  std::size_t max_alignment() const override { return kHeapAlignment; }
  std::size_t mapped_bytes() const override { return heap_bytes_; }
  SymmetricAddressMap place_table(std::vector<std::int64_t> table, std::size_t bytes) const override {
    return SymmetricAddressMap::from_table("shm", team_.rank(), std::move(table), bytes);  // kernels read the host table
  }

  void release() {
    engine_.release();  // before the memory it covers goes
    for (auto base : bases_)
      if (base != 0) ::munmap(reinterpret_cast<void*>(base), heap_bytes_);
    bases_.clear();
    if (memfd_ >= 0) ::close(memfd_);
    memfd_ = -1;
  }

  std::size_t heap_bytes_;
  int memfd_ = -1;
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
