// python/src/core.cpp — aperture._core, the nanobind extension: the C++ Team, providers, maps and
// Communicator, bound as they are. The Python package (python/aperture) adds tensors around them;
// every check and every collective is the C++ library's.
//
// Lifetimes follow the C++ rules ("the Team must outlive the provider", "provider and team must
// outlive the Communicator") through nanobind's keep_alive: a provider holds its team, an
// allocation its provider, a Communicator both. Memory handed to torch or numpy holds its
// Allocation object (DLPack owner), so a tensor never outlives the provider it lies in.
//
// Calls that may wait for other ranks release the GIL; C++ code that calls back into Python (a
// ForeignProvider's allocations) takes it again.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <tuple>
#include <string_view>
#include <utility>
#include <vector>

#include "aperture/aperture.h"
#include "aperture/collectives/communicator.h"
#include "aperture/collectives/overlapped_gemm.h"

#if APERTURE_PY_WITH_CUDA
#  include <cuda_runtime_api.h>
#endif

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using aperture::Error;
using aperture::ErrorCode;

// --- errors --------------------------------------------------------------------------------------
// aperture.Error is a Python class (aperture/_error.py) so that the Python layer raises the same
// type; C++ errors become it with their message, code and failed call.
void translate_error(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const Error& e) {
    nb::object type = nb::module_::import_("aperture._error").attr("Error");
    nb::object exc = type(e.what(), "code"_a = e.code(), "call"_a = std::string(e.call()));
    PyErr_SetObject(type.ptr(), exc.ptr());
  }
}

[[noreturn]] void refuse(const std::string& detail) { throw Error(ErrorCode::invalid_argument, detail); }

// --- handles -----------------------------------------------------------------------------------
// One allocation of a provider, freed at most once.
struct AllocationBox {
  aperture::Allocation allocation;
  std::string provider;  // its provider's name, for messages
  bool freed = false;
};

std::string kind_name(aperture::MemoryKind kind) { return kind == aperture::MemoryKind::host ? "host" : "device"; }

void* as_pointer(std::uintptr_t address) { return reinterpret_cast<void*>(address); }  // NOLINT(performance-no-int-to-ptr)
aperture::Stream as_stream(std::uintptr_t stream) { return reinterpret_cast<aperture::Stream>(stream); }  // NOLINT

// --- host transfers through a map's engine ----------------------------------------------------
// `bytes` bytes between host memory `local` of this process and a peer's copy of the allocation
// at `address`'s offset (`address` lies in this rank's copy), for a peer out of load/store reach
// (table entry 0: another node), through the engine the provider attached (MPI one-sided or the
// message engine). The engine completes each call before it returns, so calls complete in order.
// The PeerView is built on the host table, since a GPU map's own table lies in device memory.
void engine_transfer(const aperture::SymmetricAddressMap& map, aperture::EngineOp op, std::uintptr_t address,
                     std::uintptr_t local, std::size_t bytes, int peer) {
  const std::string call = op == aperture::EngineOp::put ? "AddressMap.engine_put" : "AddressMap.engine_get";
  if (peer < 0 || peer >= map.world_size)
    refuse(call + ": rank " + std::to_string(peer) + " is not a rank of this map (world_size " +
           std::to_string(map.world_size) + ")");
  if (map.is_direct(peer))
    refuse(call + ": rank " + std::to_string(peer) + " is reachable by load/store (its table entry is not 0); "
           "the engine serves peers of other nodes only: copy through AddressMap.translate");
  const aperture::EngineChannel channel = map.engine();
  if (!channel.attached())
    throw Error(ErrorCode::unavailable, call + ": rank " + std::to_string(peer) + " is out of load/store reach and "
                "this allocation has no engine (one node, or ranks not started by mpirun: docs/MULTINODE.md)");
  if (bytes == 0) return;
  if (!map.owns(as_pointer(address), bytes))
    refuse(call + ": the " + std::to_string(bytes) + " bytes at the address given do not lie in this rank's copy "
           "of the allocation");
  const auto table = map.host_peer_bases();
  const aperture::PeerView view{map.local_rank, map.world_size, table.data(), map.allocation_bytes, channel};
  auto* remote = static_cast<std::uint8_t*>(as_pointer(address));
  auto* mine = static_cast<std::uint8_t*>(as_pointer(local));
  nb::gil_scoped_release unlocked;
  if (op == aperture::EngineOp::put) view.put(remote, mine, bytes, peer);
  else view.get(mine, remote, bytes, peer);
}

// `bytes` bytes at `address` as a 1-D uint8 array of `Framework`, on the CPU (device < 0) or on
// CUDA device `device`, kept alive by `owner`.
template <class Framework>
nb::ndarray<Framework, std::uint8_t, nb::ndim<1>> wrap_bytes(std::uintptr_t address, std::size_t bytes, nb::handle owner,
                                                             int device) {
  const std::size_t shape[1] = {bytes};
  const int device_type = device < 0 ? nb::device::cpu::value : nb::device::cuda::value;
  return nb::ndarray<Framework, std::uint8_t, nb::ndim<1>>(as_pointer(address), 1, shape, owner, nullptr,
                                                            nb::dtype<std::uint8_t>(), device_type,
                                                            device < 0 ? 0 : device);
}

// The CUDA device `address` lies on, or -1 for host memory (and everywhere without CUDA).
int device_of(std::uintptr_t address) {
#if APERTURE_PY_WITH_CUDA
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, as_pointer(address)) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return attributes.type == cudaMemoryTypeDevice ? attributes.device : -1;
#else
  (void)address;
  return -1;
#endif
}

// A map from any allocator's table: `owner` (the memory, the table's device copy when given)
// stays alive while any copy of the map does.
aperture::SymmetricAddressMap map_from_table(int local_rank, std::vector<std::int64_t> peer_bases, std::size_t bytes,
                                             std::uintptr_t device_table, nb::object owner) {
  aperture::TablePlacement placement;
  placement.device_table = reinterpret_cast<const std::int64_t*>(device_table);  // NOLINT(performance-no-int-to-ptr)
  if (!owner.is_none()) {
    // The Python owner is released with the GIL held, whichever thread drops the last copy.
    auto* held = new nb::object(std::move(owner));
    placement.owner = std::shared_ptr<const void>(held, [](const void* p) {
      nb::gil_scoped_acquire gil;
      delete static_cast<const nb::object*>(p);
    });
  }
  return aperture::SymmetricAddressMap::from_table("from_table", local_rank, std::move(peer_bases), bytes,
                                                   std::move(placement));
}

// A Communicator that close() can end before Python drops the object (its destructor is collective).
struct CommunicatorBox {
  std::unique_ptr<aperture::Communicator> comm;
  aperture::Communicator& get() {
    if (!comm) throw Error(ErrorCode::invalid_argument, "Communicator: used after close(); make a new one");
    return *comm;
  }
};

// An OverlappedGemm that close() can end before Python drops the object (its destructor is collective).
struct OverlappedGemmBox {
  std::unique_ptr<aperture::OverlappedGemm> gemm;
  aperture::OverlappedGemm& get() {
    if (!gemm) throw Error(ErrorCode::invalid_argument, "OverlappedGemm: used after close(); make a new one");
    return *gemm;
  }
};

// A provider whose memory another library allocates, reached through a Python object, so that
// the C++ code that takes a Provider (the Communicator, OverlappedGemm) can allocate from it:
//   allocator.allocate(bytes, alignment) -> (address, map)   collective; `map` (map_from_table)
//       owns the memory through its table's owner, so the memory lives while any copy of the
//       map does and goes with the last one;
//   allocator.place_table(list of int) -> tensor             (device memory only) the table of
//       a view, where the provider's kernels read it (an int64 tensor; its data_ptr is the table);
//   allocator.free(address)                                  optional, collective: for allocators
//       whose memory is released by a call rather than by dropping the last reference.
// aperture.allocators.ForeignAllocator is the Python side (torch symmetric memory the first one).
// The checks (double free, ranges it does not own) are made here, as the C++ providers make them.
class ForeignProvider final : public aperture::Provider {
 public:
  ForeignProvider(std::string name, aperture::MemoryKind kind, nb::object allocator)
      : name_(std::move(name)), kind_(kind), allocator_(std::move(allocator)) {}
  ~ForeignProvider() override {
    nb::gil_scoped_acquire gil;  // the maps' owners are Python objects
    live_.clear();
    allocator_.reset();
  }

  std::string_view name() const override { return name_; }
  aperture::MemoryKind memory_kind() const override { return kind_; }
  bool is_linear() const override { return false; }

  aperture::Allocation allocate(std::size_t bytes, std::size_t alignment) override {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0)
      refuse(name_ + " allocate: alignment " + std::to_string(alignment) + " is not a power of two");
    nb::gil_scoped_acquire gil;
    auto [address, map] = nb::cast<std::tuple<std::uintptr_t, aperture::SymmetricAddressMap>>(
        allocator_.attr("allocate")(bytes, alignment));
    if (address % alignment != 0 || map.allocation_base != address || map.allocation_bytes != bytes)
      throw Error(ErrorCode::internal, name_ + " allocate: the allocator returned " + std::to_string(bytes) +
                                           " bytes at " + std::to_string(address) + " with a map of " +
                                           std::to_string(map.allocation_bytes) + " bytes at " +
                                           std::to_string(map.allocation_base) + " (alignment " +
                                           std::to_string(alignment) + " asked)");
    live_.push_back(map);
    return aperture::Allocation{as_pointer(address), bytes, std::move(map)};
  }

  void free(aperture::Allocation& allocation) override {
    const auto it = std::find_if(live_.begin(), live_.end(), [&](const aperture::SymmetricAddressMap& m) {
      return m.allocation_base == reinterpret_cast<std::uintptr_t>(allocation.ptr);
    });
    if (it == live_.end())
      refuse(name_ + " free: no live allocation of this provider starts at " +
             std::to_string(reinterpret_cast<std::uintptr_t>(allocation.ptr)) +
             " (freed already, or another provider's); free each allocation once, with its provider");
    nb::gil_scoped_acquire gil;  // the last copies of the map may drop the memory's Python owner
    const aperture::SymmetricAddressMap map = std::move(*it);
    live_.erase(it);
    const auto address = reinterpret_cast<std::uintptr_t>(allocation.ptr);
    allocation = {};
    if (nb::hasattr(allocator_, "free")) allocator_.attr("free")(address);
    map.mark_freed();  // every copy of the map refuses the checked path from now on
  }

  aperture::SymmetricAddressMap symmetric_address_map(const void* ptr, std::size_t bytes) const override {
    for (const auto& m : live_) {
      if (!m.owns(ptr, std::max<std::size_t>(bytes, 1))) continue;
      std::vector<std::int64_t> table = m.view_table(ptr, bytes);
      nb::gil_scoped_acquire gil;
      if (kind_ == aperture::MemoryKind::host) return map_from_table(m.local_rank, std::move(table), bytes, 0, nb::none());
      nb::object placed = allocator_.attr("place_table")(table);
      const auto device_table = nb::cast<std::uintptr_t>(placed.attr("data_ptr")());
      return map_from_table(m.local_rank, std::move(table), bytes, device_table, std::move(placed));
    }
    refuse(name_ + " symmetric_address_map: " + std::to_string(bytes) + " bytes at " +
           std::to_string(reinterpret_cast<std::uintptr_t>(ptr)) + " lie in no live allocation of this provider");
  }

 private:
  std::string name_;
  aperture::MemoryKind kind_;
  nb::object allocator_;
  std::vector<aperture::SymmetricAddressMap> live_;  // one per live allocation
};

}  // namespace

// The GPU proxy for Triton kernels: python/src/proxy.cpp.
void aperture_python_bind_proxy(nb::module_& m);

NB_MODULE(_core, m) {
  m.doc() = "aperture's C++ core (teams, providers, address maps, collectives); use the aperture package";
  nb::register_exception_translator(translate_error);
  // Teams and providers held in module globals until the interpreter exits are not leaks.
  nb::set_leak_warnings(false);

  nb::enum_<aperture::MemoryKind>(m, "MemoryKind", "host or device memory (aperture::MemoryKind)")
      .value("host", aperture::MemoryKind::host)
      .value("device", aperture::MemoryKind::device);

  nb::enum_<ErrorCode>(m, "ErrorCode", "Why a call failed (aperture::ErrorCode)")
      .value("invalid_argument", ErrorCode::invalid_argument)
      .value("timeout", ErrorCode::timeout)
      .value("peer_lost", ErrorCode::peer_lost)
      .value("mismatch", ErrorCode::mismatch)
      .value("unavailable", ErrorCode::unavailable)
      .value("out_of_memory", ErrorCode::out_of_memory)
      .value("system", ErrorCode::system)
      .value("internal", ErrorCode::internal);

  m.attr("with_cuda") = bool(APERTURE_PY_WITH_CUDA);
  m.attr("version") = APERTURE_VERSION_STRING;  // the C++ library's (`aperture --version`)

  // The collectives' element types and reductions, by the C++ names (aperture/collectives/types.h):
  // Python's dtype list comes from here, and a dtype crosses into C++ as this enum. The lists
  // are the C++ ones, so an element type added there appears here with no edit.
  auto data_types = nb::enum_<aperture::DataType>(m, "DataType", "an element type collectives take (aperture::DataType)");
  for (aperture::DataType t : aperture::kAllDataTypes) data_types.value(aperture::name_of(t), t);
  auto reduce_ops = nb::enum_<aperture::ReduceOp>(m, "ReduceOp", "a reduction collectives apply (aperture::ReduceOp)");
  for (aperture::ReduceOp op : aperture::kAllReduceOps) reduce_ops.value(aperture::name_of(op), op);

  // Weakly referenceable: Python keeps per-team state (aperture.collectives._dropped) without
  // extending the team's life.
  nb::class_<aperture::Team>(m, "Team", "Who we are, and how ranks talk before any symmetric memory exists",
                             nb::is_weak_referenceable())
      .def_static("from_env", &aperture::Team::from_env, nb::call_guard<nb::gil_scoped_release>(),
                  "aperture launch, mpirun, torchrun, or a team of one rank")
      .def_static("single", &aperture::Team::single, "a team of one rank, whatever the environment says")
      .def_prop_ro("rank", &aperture::Team::rank)
      .def_prop_ro("size", &aperture::Team::size)
      .def_prop_ro("local_rank", &aperture::Team::local_rank)
      .def_prop_ro("local_size", &aperture::Team::local_size)
      .def_prop_ro("launched_by", [](const aperture::Team& t) { return std::string(t.launched_by()); })
      .def("same_node", &aperture::Team::same_node, "peer"_a)
      .def_prop_ro("node", &aperture::Team::node, "this rank's node, 0 .. node_count - 1 (nodes in order of their first rank)")
      .def_prop_ro("node_count", &aperture::Team::node_count, "nodes the team spans (machines sharing no memory)")
      .def("node_of", &aperture::Team::node_of, "rank"_a, "the node of `rank`")
      .def("barrier", &aperture::Team::barrier, nb::call_guard<nb::gil_scoped_release>(), "collective")
      .def("allgather", [](aperture::Team& t, nb::bytes mine) {
        const std::string in(mine.c_str(), mine.size());
        std::string all(in.size() * static_cast<std::size_t>(t.size()), '\0');
        {
          nb::gil_scoped_release unlocked;
          t.allgather(in.data(), all.data(), in.size());
        }
        nb::list out;
        for (int r = 0; r < t.size(); ++r) out.append(nb::bytes(all.data() + r * in.size(), in.size()));
        return out;
      }, "mine"_a, "collective: every rank's `mine`, in rank order (every rank gives as many bytes)")
      .def("__repr__", [](const aperture::Team& t) {
        return "Team(rank=" + std::to_string(t.rank()) + ", size=" + std::to_string(t.size()) + ", launched_by=\"" +
               std::string(t.launched_by()) + "\")";
      });

  m.def("available_providers", &aperture::available_providers,
        "names of the providers compiled in and usable on this machine now");
  m.def("default_provider_name", &aperture::default_provider_name);
  m.def("provider_statuses", [] {
    std::vector<std::tuple<std::string, bool, bool, std::string>> out;
    for (auto& s : aperture::provider_statuses()) out.emplace_back(s.name, s.compiled_in, s.available, s.reason);
    return out;
  }, "(name, compiled_in, available, reason) of every known provider");

  nb::class_<aperture::SymmetricAddressMap>(m, "AddressMap", "one symmetric allocation's table (SymmetricAddressMap)")
      .def_ro("local_rank", &aperture::SymmetricAddressMap::local_rank)
      .def_ro("world_size", &aperture::SymmetricAddressMap::world_size)
      .def_ro("allocation_base", &aperture::SymmetricAddressMap::allocation_base)
      .def_ro("allocation_bytes", &aperture::SymmetricAddressMap::allocation_bytes)
      .def_prop_ro("host_peer_bases", [](const aperture::SymmetricAddressMap& map) {
        const auto table = map.host_peer_bases();
        return std::vector<std::int64_t>(table.begin(), table.end());
      })
      // Where kernels read the table: its address and whether that is device memory.
      .def_prop_ro("table_address", [](const aperture::SymmetricAddressMap& map) {
        return reinterpret_cast<std::uintptr_t>(map.peer_bases());
      })
      .def_prop_ro("table_on_device", [](const aperture::SymmetricAddressMap& map) {
        return map.peer_bases() != map.host_peer_bases().data();
      })
      .def("is_direct", &aperture::SymmetricAddressMap::is_direct, "peer"_a)
      .def_prop_ro("all_direct", &aperture::SymmetricAddressMap::all_direct)
      .def_prop_ro("indirect_peers", &aperture::SymmetricAddressMap::indirect_peers)
      .def("owns_range", [](const aperture::SymmetricAddressMap& map, std::uintptr_t address, std::size_t bytes) {
        return map.owns(as_pointer(address), bytes);
      }, "address"_a, "bytes"_a)
      .def_prop_ro("freed", &aperture::SymmetricAddressMap::freed)
      .def_prop_ro("has_engine", [](const aperture::SymmetricAddressMap& map) { return map.engine().attached(); })
      .def("engine_put", [](const aperture::SymmetricAddressMap& map, std::uintptr_t address, std::uintptr_t local,
                            std::size_t bytes, int to_rank) {
        engine_transfer(map, aperture::EngineOp::put, address, local, bytes, to_rank);
      }, "address"_a, "local"_a, "bytes"_a, "to_rank"_a)
      .def("engine_get", [](const aperture::SymmetricAddressMap& map, std::uintptr_t local, std::uintptr_t address,
                            std::size_t bytes, int from_rank) {
        engine_transfer(map, aperture::EngineOp::get, address, local, bytes, from_rank);
      }, "local"_a, "address"_a, "bytes"_a, "from_rank"_a)
      // A peer's address of `address` (which lies in this rank's copy), through the checked path.
      .def("translate", [](const aperture::SymmetricAddressMap& map, std::uintptr_t address, int to_rank,
                           std::size_t bytes) {
        return reinterpret_cast<std::uintptr_t>(
            aperture::checked_translate(map, static_cast<std::uint8_t*>(as_pointer(address)), to_rank, bytes));
      }, "address"_a, "to_rank"_a, "bytes"_a = 1);

  m.def("map_from_table", &map_from_table, "local_rank"_a, "peer_bases"_a, "allocation_bytes"_a,
        "device_table"_a = 0, "owner"_a = nb::none());

  nb::class_<AllocationBox>(m, "Allocation", "one symmetric allocation of a provider")
      .def_prop_ro("address", [](const AllocationBox& a) { return reinterpret_cast<std::uintptr_t>(a.allocation.ptr); })
      .def_prop_ro("bytes", [](const AllocationBox& a) { return a.allocation.bytes; })
      .def_prop_ro("map", [](const AllocationBox& a) { return a.allocation.map; })
      .def_prop_ro("provider_name", [](const AllocationBox& a) { return a.provider; })
      .def_prop_ro("freed", [](const AllocationBox& a) { return a.freed; });

  m.def("as_torch", &wrap_bytes<nb::pytorch>, "address"_a, "bytes"_a, "owner"_a, "device"_a);
  m.def("as_numpy", &wrap_bytes<nb::numpy>, "address"_a, "bytes"_a, "owner"_a, "device"_a);
  m.def("device_of", &device_of, "address"_a, "the CUDA device an address lies on, or -1 for host memory");

  nb::class_<aperture::Provider>(m, "Provider", "symmetric memory of one allocator (aperture::Provider)")
      .def_prop_ro("name", [](const aperture::Provider& p) { return std::string(p.name()); })
      .def_prop_ro("memory_kind", [](const aperture::Provider& p) { return kind_name(p.memory_kind()); })
      .def_prop_ro("is_linear", &aperture::Provider::is_linear)
      .def("allocate", [](aperture::Provider& p, std::size_t bytes, std::size_t alignment) {
        auto box = std::make_unique<AllocationBox>();
        {
          nb::gil_scoped_release release;
          box->allocation = p.allocate(bytes, alignment);
        }
        box->provider = std::string(p.name());
        return box;
      }, "bytes"_a, "alignment"_a = 256, nb::keep_alive<0, 1>(), "collective")
      .def("free", [](aperture::Provider& p, AllocationBox& box) {
        if (box.freed)
          throw Error(ErrorCode::invalid_argument, "free: this allocation of provider " + box.provider +
                                                       " was freed already; free each allocation once");
        {
          nb::gil_scoped_release release;
          p.free(box.allocation);
        }
        box.freed = true;
      }, "allocation"_a, "collective")
      .def("symmetric_address_map", [](const aperture::Provider& p, std::uintptr_t address, std::size_t bytes) {
        return p.symmetric_address_map(as_pointer(address), bytes);
      }, "address"_a, "bytes"_a);

  nb::class_<ForeignProvider, aperture::Provider>(m, "ForeignProvider",
                                                 "a provider whose memory a Python allocator hands out")
      .def(nb::init<std::string, aperture::MemoryKind, nb::object>(), "name"_a, "memory_kind"_a, "allocator"_a);

  m.def("make_provider", &aperture::make_provider, "name"_a, "team"_a, nb::keep_alive<0, 2>(),
        nb::call_guard<nb::gil_scoped_release>(), "collective");

  using Map = const aperture::SymmetricAddressMap*;  // None: an ordinary (staged) input
  nb::class_<CommunicatorBox>(m, "Communicator", "the C++ collectives (aperture::Communicator) on raw addresses")
      .def("__init__", [](CommunicatorBox* self, aperture::Provider& provider, aperture::Team& team) {
        auto* box = new (self) CommunicatorBox();
        nb::gil_scoped_release release;
        box->comm = std::make_unique<aperture::Communicator>(provider, team);
      }, "provider"_a, "team"_a, nb::keep_alive<1, 2>(), nb::keep_alive<1, 3>(), "collective")
      .def_prop_ro("rank", [](CommunicatorBox& b) { return b.get().rank(); })
      .def_prop_ro("size", [](CommunicatorBox& b) { return b.get().size(); })
      .def_prop_ro("closed", [](const CommunicatorBox& b) { return !b.comm; })
      .def_prop_ro("memory_kind", [](CommunicatorBox& b) { return kind_name(b.get().memory_kind()); })
      // Collective: frees the scratch now rather than whenever the garbage collector gets to it.
      .def("close", [](CommunicatorBox& b) { b.comm.reset(); }, nb::call_guard<nb::gil_scoped_release>())
      .def("barrier", [](CommunicatorBox& b, std::uintptr_t stream) { b.get().barrier(as_stream(stream)); },
           "stream"_a = 0, nb::call_guard<nb::gil_scoped_release>())
      .def("broadcast", [](CommunicatorBox& b, std::uintptr_t in, Map in_map, std::uintptr_t out, std::size_t count,
                           aperture::DataType type, int root, std::uintptr_t stream) {
        if (const auto* map = in_map)
          b.get().broadcast(as_pointer(in), *map, as_pointer(out), count, type, root, as_stream(stream));
        else
          b.get().broadcast(as_pointer(in), as_pointer(out), count, type, root, as_stream(stream));
      }, "inp"_a, "in_map"_a.none(), "out"_a, "count"_a, "dtype"_a, "root"_a, "stream"_a = 0,
         nb::call_guard<nb::gil_scoped_release>())
      .def("all_gather", [](CommunicatorBox& b, std::uintptr_t in, Map in_map, std::uintptr_t out, std::size_t count,
                            aperture::DataType type, std::uintptr_t stream) {
        if (const auto* map = in_map)
          b.get().all_gather(as_pointer(in), *map, as_pointer(out), count, type, as_stream(stream));
        else
          b.get().all_gather(as_pointer(in), as_pointer(out), count, type, as_stream(stream));
      }, "inp"_a, "in_map"_a.none(), "out"_a, "count"_a, "dtype"_a, "stream"_a = 0,
         nb::call_guard<nb::gil_scoped_release>())
      .def("reduce_scatter", [](CommunicatorBox& b, std::uintptr_t in, Map in_map, std::uintptr_t out,
                                std::size_t count, aperture::DataType type, aperture::ReduceOp op, std::uintptr_t stream) {
        if (const auto* map = in_map)
          b.get().reduce_scatter(as_pointer(in), *map, as_pointer(out), count, type, op,
                                 as_stream(stream));
        else
          b.get().reduce_scatter(as_pointer(in), as_pointer(out), count, type, op,
                                 as_stream(stream));
      }, "inp"_a, "in_map"_a.none(), "out"_a, "count"_a, "dtype"_a, "op"_a, "stream"_a = 0,
         nb::call_guard<nb::gil_scoped_release>())
      .def("all_reduce", [](CommunicatorBox& b, std::uintptr_t in, Map in_map, std::uintptr_t out, std::size_t count,
                            aperture::DataType type, aperture::ReduceOp op, std::uintptr_t stream) {
        const auto algorithm = aperture::AllReduceAlgorithm::automatic;
        if (const auto* map = in_map)
          b.get().all_reduce(as_pointer(in), *map, as_pointer(out), count, type, op, algorithm,
                             as_stream(stream));
        else
          b.get().all_reduce(as_pointer(in), as_pointer(out), count, type, op, algorithm,
                             as_stream(stream));
      }, "inp"_a, "in_map"_a.none(), "out"_a, "count"_a, "dtype"_a, "op"_a, "stream"_a = 0,
         nb::call_guard<nb::gil_scoped_release>())
      .def("all_to_all", [](CommunicatorBox& b, std::uintptr_t in, Map in_map, std::uintptr_t out, std::size_t count,
                            aperture::DataType type, std::uintptr_t stream) {
        if (const auto* map = in_map)
          b.get().all_to_all(as_pointer(in), *map, as_pointer(out), count, type, as_stream(stream));
        else
          b.get().all_to_all(as_pointer(in), as_pointer(out), count, type, as_stream(stream));
      }, "inp"_a, "in_map"_a.none(), "out"_a, "count"_a, "dtype"_a, "stream"_a = 0,
         nb::call_guard<nb::gil_scoped_release>())
      .def("check", [](CommunicatorBox& b, std::uintptr_t stream) { b.get().check(as_stream(stream)); },
           "stream"_a = 0, nb::call_guard<nb::gil_scoped_release>())
      .def_prop_ro("between_nodes", [](CommunicatorBox& b) { return std::string(b.get().between_nodes()); });

  // Every matrix is a bf16 address of this rank's GPU; the Python layer
  // (aperture/ops/_overlapped_gemm.py) checks the tensors, the C++ class the shapes and the alignment.
  nb::class_<OverlappedGemmBox>(m, "OverlappedGemm", "all-gather + GEMM and GEMM + reduce-scatter (aperture::OverlappedGemm)")
      .def("__init__", [](OverlappedGemmBox* self, aperture::Provider& provider, aperture::Team& team) {
        auto* box = new (self) OverlappedGemmBox();
        nb::gil_scoped_release release;
        box->gemm = std::make_unique<aperture::OverlappedGemm>(provider, team);
      }, "provider"_a, "team"_a, nb::keep_alive<1, 2>(), nb::keep_alive<1, 3>(), "collective")
      .def_prop_ro("rank", [](OverlappedGemmBox& b) { return b.get().rank(); })
      .def_prop_ro("size", [](OverlappedGemmBox& b) { return b.get().size(); })
      .def_prop_ro("closed", [](const OverlappedGemmBox& b) { return !b.gemm; })
      .def("close", [](OverlappedGemmBox& b) { b.gemm.reset(); }, nb::call_guard<nb::gil_scoped_release>())
      .def("reserve", [](OverlappedGemmBox& b, std::size_t m, std::size_t n, std::size_t k) { b.get().reserve(m, n, k); },
           "m"_a, "n"_a, "k"_a, nb::call_guard<nb::gil_scoped_release>())
      .def("ag_gemm", [](OverlappedGemmBox& b, std::uintptr_t a_shard, std::uintptr_t b_matrix, std::uintptr_t c,
                         std::size_t m, std::size_t n, std::size_t k, std::uintptr_t stream) {
        b.get().ag_gemm(as_pointer(a_shard), as_pointer(b_matrix), as_pointer(c), m, n, k, as_stream(stream));
      }, "a_shard"_a, "b"_a, "c"_a, "m"_a, "n"_a, "k"_a, "stream"_a = 0, nb::call_guard<nb::gil_scoped_release>())
      .def("gemm_rs", [](OverlappedGemmBox& b, std::uintptr_t a, std::uintptr_t b_matrix, std::uintptr_t c_shard,
                         std::size_t m, std::size_t n, std::size_t k, std::uintptr_t stream) {
        b.get().gemm_rs(as_pointer(a), as_pointer(b_matrix), as_pointer(c_shard), m, n, k, as_stream(stream));
      }, "a"_a, "b"_a, "c_shard"_a, "m"_a, "n"_a, "k"_a, "stream"_a = 0, nb::call_guard<nb::gil_scoped_release>())
      .def("check", [](OverlappedGemmBox& b, std::uintptr_t stream) { b.get().check(as_stream(stream)); },
           "stream"_a = 0, nb::call_guard<nb::gil_scoped_release>());

  aperture_python_bind_proxy(m);
}
