"""The few NVML calls topology discovery makes, with pynvml's names, through ctypes.

Topology discovery reads NVML through pynvml where it is installed (as Iris does); torch does not
install pynvml, so without it this binding answers the same calls from the driver's
``libnvidia-ml.so.1``. Handles are plain ``c_void_p`` values, failures raise ``NVMLError`` as
pynvml's do. Layouts and numbers are NVML's (nvml.h).
"""

import ctypes
import ctypes.util

NVML_SUCCESS = 0
NVML_DEVICE_UUID_BUFFER_SIZE = 96  # NVML_DEVICE_UUID_V2_BUFFER_SIZE
NVML_NVLINK_MAX_LINKS = 18
# nvmlIntNvLinkDeviceType_t
NVML_NVLINK_DEVICE_TYPE_GPU = 0x00
NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02


class NVMLError(Exception):
    """An NVML call returned something other than NVML_SUCCESS."""

    def __init__(self, call, status, text=""):
        super().__init__(f"{call} returned {status}{': ' + text if text else ''}")
        self.call, self.status = call, status


class nvmlPciInfo_t(ctypes.Structure):
    _fields_ = [
        ("busIdLegacy", ctypes.c_char * 16),
        ("domain", ctypes.c_uint),
        ("bus", ctypes.c_uint),
        ("device", ctypes.c_uint),
        ("pciDeviceId", ctypes.c_uint),
        ("pciSubSystemId", ctypes.c_uint),
        ("busId", ctypes.c_char * 32),
    ]


_library = None


def library_path():
    return ctypes.util.find_library("nvidia-ml") or "libnvidia-ml.so.1"


def available():
    """Whether the driver's NVML library loads here (False on a machine without NVIDIA's driver)."""
    try:
        _lib()
        return True
    except OSError:
        return False


def _lib():
    global _library
    if _library is None:
        _library = ctypes.CDLL(library_path())
    return _library


def _call(name, *args):
    lib = _lib()
    status = getattr(lib, name)(*args)
    if status != NVML_SUCCESS:
        error_string = lib.nvmlErrorString
        error_string.restype = ctypes.c_char_p
        raise NVMLError(name, status, (error_string(status) or b"").decode(errors="replace"))


def nvmlInit():
    _call("nvmlInit_v2")


def nvmlShutdown():
    _call("nvmlShutdown")


def nvmlDeviceGetHandleByIndex(index):
    handle = ctypes.c_void_p()
    _call("nvmlDeviceGetHandleByIndex_v2", ctypes.c_uint(index), ctypes.byref(handle))
    return handle


def nvmlDeviceGetHandleByPciBusId(bus_id):
    handle = ctypes.c_void_p()
    _call("nvmlDeviceGetHandleByPciBusId_v2", ctypes.c_char_p(_as_bytes(bus_id)), ctypes.byref(handle))
    return handle


def nvmlDeviceGetPciInfo(handle):
    info = nvmlPciInfo_t()
    _call("nvmlDeviceGetPciInfo_v3", handle, ctypes.byref(info))
    return info


def nvmlDeviceGetUUID(handle):
    buffer = ctypes.create_string_buffer(NVML_DEVICE_UUID_BUFFER_SIZE)
    _call("nvmlDeviceGetUUID", handle, buffer, ctypes.c_uint(NVML_DEVICE_UUID_BUFFER_SIZE))
    return buffer.value.decode()


def nvmlDeviceGetNvLinkState(handle, link):
    state = ctypes.c_int()
    _call("nvmlDeviceGetNvLinkState", handle, ctypes.c_uint(link), ctypes.byref(state))
    return state.value


def nvmlDeviceGetNvLinkRemotePciInfo(handle, link):
    info = nvmlPciInfo_t()
    _call("nvmlDeviceGetNvLinkRemotePciInfo_v2", handle, ctypes.c_uint(link), ctypes.byref(info))
    return info


def nvmlDeviceGetNvLinkRemoteDeviceType(handle, link):
    kind = ctypes.c_int()
    _call("nvmlDeviceGetNvLinkRemoteDeviceType", handle, ctypes.c_uint(link), ctypes.byref(kind))
    return kind.value


def nvmlDeviceGetTopologyCommonAncestor(handle_a, handle_b):
    level = ctypes.c_int()
    _call("nvmlDeviceGetTopologyCommonAncestor", handle_a, handle_b, ctypes.byref(level))
    return level.value


def _as_bytes(text):
    return text if isinstance(text, bytes) else str(text).encode()
