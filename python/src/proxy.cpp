// python/src/proxy.cpp — aperture._core's GPU proxy (aperture::GpuProxy) for Triton kernels.
//
// A Triton kernel reaches a peer whose table entry is 0 through the same request queue that C++
// kernels use (aperture/proxy_queue.h): aperture.triton posts the requests itself, from the
// queue's addresses and the slot layout, which this file hands to Python. The queue's memory is
// the C++ proxy's: pinned host memory mapped for the GPU with the tickets in device memory
// (kernels compiled for a GPU), or host memory (kernels run by Triton's interpreter on CPUs).
//
// Kept apart from core.cpp (bind_proxy is called from its module) so that the two change
// independently.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "aperture/aperture.h"
#include "aperture/gpu_proxy.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using aperture::Error;
using aperture::ErrorCode;

// One proxy. stop() ends its thread at once; the queue's memory stays until Python drops the
// object, so a kernel still polling it reads `closed` rather than freed memory. `origin` is the address, in this
// process, of the engine's offset 0: a request's offset is a pointer minus it, whichever map of
// the engine the pointer lies in.
struct ProxyBox {
  std::unique_ptr<aperture::GpuProxy> proxy;
  aperture::EngineChannel engine{};  // the engine's identity, for covers()
  std::int64_t origin = 0;
  bool host_queue = false;
  bool stopped = false;
};

std::int64_t origin_of(const aperture::SymmetricAddressMap& map) {
  const auto table = map.host_peer_bases();
  return table[static_cast<std::size_t>(map.local_rank)] - static_cast<std::int64_t>(map.engine().base_offset);
}

bool same_engine(const aperture::EngineChannel& a, const aperture::EngineChannel& b) {
  return a.context == b.context && a.host_call == b.host_call;
}

}  // namespace

void aperture_python_bind_proxy(nb::module_& m) {
  // Where the fields a Triton kernel writes and reads lie (aperture.triton checks its constants
  // against these when a proxy is made).
  m.def("proxy_layout", [] {
    nb::dict d;
    d["slot_bytes"] = sizeof(aperture::ProxySlot);
    d["sequence"] = offsetof(aperture::ProxySlot, sequence);
    d["done"] = offsetof(aperture::ProxySlot, done);
    d["status"] = offsetof(aperture::ProxySlot, status);
    d["result"] = offsetof(aperture::ProxySlot, result);
    d["request"] = offsetof(aperture::ProxySlot, request);
    d["payload"] = offsetof(aperture::ProxySlot, payload);
    d["payload_bytes"] = aperture::kProxyPayloadBytes;
    d["window"] = aperture::kProxyWindow;
    d["request_op"] = offsetof(aperture::EngineRequest, op);
    d["request_atomic"] = offsetof(aperture::EngineRequest, atomic);
    d["request_element"] = offsetof(aperture::EngineRequest, element);
    d["request_element_bytes"] = offsetof(aperture::EngineRequest, element_bytes);
    d["request_peer"] = offsetof(aperture::EngineRequest, peer);
    d["request_offset"] = offsetof(aperture::EngineRequest, offset);
    d["request_bytes"] = offsetof(aperture::EngineRequest, bytes);
    d["request_value"] = offsetof(aperture::EngineRequest, value);
    d["request_compare"] = offsetof(aperture::EngineRequest, compare);
    d["op_put"] = static_cast<int>(aperture::EngineOp::put);
    d["op_get"] = static_cast<int>(aperture::EngineOp::get);
    d["op_fetch_op"] = static_cast<int>(aperture::EngineOp::fetch_op);
    d["op_compare_swap"] = static_cast<int>(aperture::EngineOp::compare_swap);
    d["op_signal"] = static_cast<int>(aperture::EngineOp::signal);
    d["atomic_add"] = static_cast<int>(aperture::EngineAtomic::add);
    d["atomic_sub"] = static_cast<int>(aperture::EngineAtomic::sub);
    d["atomic_and"] = static_cast<int>(aperture::EngineAtomic::band);
    d["atomic_or"] = static_cast<int>(aperture::EngineAtomic::bor);
    d["atomic_xor"] = static_cast<int>(aperture::EngineAtomic::bxor);
    d["atomic_min"] = static_cast<int>(aperture::EngineAtomic::min);
    d["atomic_max"] = static_cast<int>(aperture::EngineAtomic::max);
    d["atomic_xchg"] = static_cast<int>(aperture::EngineAtomic::replace);
    d["element_signed"] = static_cast<int>(aperture::EngineElement::signed_int);
    d["element_unsigned"] = static_cast<int>(aperture::EngineElement::unsigned_int);
    d["element_floating"] = static_cast<int>(aperture::EngineElement::floating);
    d["status_ok"] = static_cast<int>(aperture::ProxyStatus::ok);
    d["status_queue_full_timeout"] = static_cast<int>(aperture::ProxyStatus::queue_full_timeout);
    d["status_completion_timeout"] = static_cast<int>(aperture::ProxyStatus::completion_timeout);
    d["status_closed"] = static_cast<int>(aperture::ProxyStatus::closed);
    return d;
  }, "the proxy queue's slot layout and codes (aperture/proxy_queue.h), for aperture.triton");

  m.def("proxy_status_name", [](std::uint32_t status) {
    return std::string(aperture::proxy_status_name(static_cast<aperture::ProxyStatus>(status)));
  }, "status"_a);

  nb::class_<ProxyBox>(m, "GpuProxy", "a request queue and the thread that carries its requests out (aperture::GpuProxy)")
      .def("__init__", [](ProxyBox* self, const aperture::SymmetricAddressMap& map, std::uint32_t capacity,
                          bool host_queue, double timeout_s) {
        aperture::GpuProxy::Options options;
        options.capacity = capacity;
        options.memory = host_queue ? aperture::GpuProxy::QueueMemory::host : aperture::GpuProxy::QueueMemory::device_mapped;
        options.timeout_s = timeout_s;
        auto* box = new (self) ProxyBox();
        box->proxy = std::make_unique<aperture::GpuProxy>(map, options);  // throws when the map has no engine
        box->engine = map.engine();
        box->origin = origin_of(map);
        box->host_queue = host_queue;
      }, "map"_a, "capacity"_a, "host_queue"_a, "timeout_s"_a)
      // What a kernel reads: slots, tickets, closed, capacity, timeout_ns, origin (aperture/triton.py).
      .def_prop_ro("handle_fields", [](ProxyBox& b) {
        const aperture::ProxyQueue& q = b.proxy->queue();
        return std::vector<std::int64_t>{
            static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(q.slots)),
            static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(q.tickets)),
            static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(q.closed)),
            static_cast<std::int64_t>(q.capacity),
            static_cast<std::int64_t>(q.timeout_ns),
            b.origin};
      })
      .def("covers", [](const ProxyBox& b, const aperture::SymmetricAddressMap& map) {
        return same_engine(b.engine, map.engine()) && origin_of(map) == b.origin;
      }, "map"_a, "whether the map's memory is reached through this proxy's engine")
      .def_prop_ro("host_queue", [](const ProxyBox& b) { return b.host_queue; })
      .def_prop_ro("stopped", [](const ProxyBox& b) { return b.stopped; })
      .def_prop_ro("completed", [](ProxyBox& b) { return b.proxy->completed(); })
      .def_prop_ro("failures", [](ProxyBox& b) { return b.proxy->failures(); })
      .def_prop_ro("last_error", [](ProxyBox& b) { return b.proxy->last_error(); })
      // Stops the thread (idempotent); producers waiting then, or posting later, see `closed`.
      .def("stop", [](ProxyBox& b) {
        b.proxy->stop();
        b.stopped = true;
      }, nb::call_guard<nb::gil_scoped_release>());
}
