"""``iris.tracing.kernel_artifacts`` (the same module as ``iris.host.tracing.kernel_artifacts``,
Iris's newest path, and ``iris.kernel_artifacts``): Iris's launcher that keeps what Triton compiled.

``iris_launch(kernel_fn, grid, *args, algorithm, rank, dtype=None, **kwargs)`` launches as
``kernel_fn[grid](*args, **kwargs)`` does and returns what that returns. When the environment
variable IRIS_KERNEL_ARTIFACTS_DIR names a directory (read once, at import), each new compiled
specialisation is also written there::

    <dir>/<algorithm>/<kernel name>/rank_<rank>/<spec>/<codegen hash>/
        metadata.json  kernel.ttir  kernel.ttgir  kernel.llir  kernel.ptx  kernel.cubin

``<spec>`` is ``BM<m>_BN<n>[_BK<k>]_<dtype>_w<num_warps>`` from the kernel's BLOCK_SIZE_*
constexprs, ``dtype`` and the warps (the first 12 characters of Triton's hash when none is
known). ``<codegen hash>`` is 12 hex digits of the SHA-256 of the device assembly (PTX on NVIDIA;
a kernel Triton compiled for AMD has AMDGCN or HSACO, written as ``kernel.amdgcn``), else of
Triton's hash. A directory that already has ``metadata.json`` is left as it is, so relaunching
the same code writes nothing.

Under Triton's interpreter (TRITON_INTERPRET=1: aperture.iris's CPU runs) nothing is compiled:
the launch runs the kernel as usual and returns None as Triton does there, nothing is written,
and the first such launch with the variable set logs a warning saying so.

The underscored helpers keep Iris's names because Iris's unit tests call them.
"""

import hashlib
import json
import logging
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, Optional

from ..logging import _log_rank

_artifacts_dir: Optional[Path] = None
_enabled: bool = False
_warned_interpreted = False

# File name -> the key of Triton's CompiledKernel.asm. NVIDIA's stages, then AMD's assembly.
_ARTIFACT_FILES = {
    "kernel.ttir": "ttir",
    "kernel.ttgir": "ttgir",
    "kernel.llir": "llir",
    "kernel.ptx": "ptx",
    "kernel.cubin": "cubin",
    "kernel.amdgcn": "amdgcn",
}
# What identifies the generated code, best first: assembly text, then the binary.
_CODEGEN_KEYS = ("ptx", "amdgcn", "cubin", "hsaco")

_DTYPE_SHORT_NAMES = {
    "torch.float16": "fp16", "torch.bfloat16": "bf16", "torch.float32": "fp32", "torch.float64": "fp64",
    "torch.int8": "i8", "torch.int16": "i16", "torch.int32": "i32", "torch.int64": "i64",
    "torch.float8_e4m3fn": "fp8e4m3fn", "torch.float8_e5m2": "fp8e5m2",
    "torch.float8_e4m3fnuz": "fp8e4m3", "torch.float8_e5m2fnuz": "fp8e5m2",
}


def _init():
    global _artifacts_dir, _enabled
    directory = os.environ.get("IRIS_KERNEL_ARTIFACTS_DIR", "").strip()
    _artifacts_dir = Path(directory) if directory else None
    _enabled = bool(directory)


def is_enabled() -> bool:
    """Whether IRIS_KERNEL_ARTIFACTS_DIR was set when this module was imported."""
    return _enabled


def iris_launch(kernel_fn, grid, *args, algorithm: str, rank: int, dtype=None, **kwargs):
    """``kernel_fn[grid](*args, **kwargs)``, keeping the compiled kernel's artifacts when enabled.

    ``algorithm`` and ``rank`` name the directories (``algorithm/<kernel>/rank_<rank>``);
    ``dtype`` (a torch dtype, optional) goes into the specialisation's name. Returns the
    launch's result: Triton's CompiledKernel, or None under the interpreter."""
    kernel_name = _get_kernel_name(kernel_fn)
    _log_rank(logging.DEBUG, "iris_launch: algorithm=%s kernel=%s grid=%s rank=%d", algorithm, kernel_name, grid,
              rank, rank=rank)
    compiled = kernel_fn[grid](*args, **kwargs)
    if _enabled:
        if compiled is None:
            _warn_interpreted(kernel_name, rank)
        else:
            _save(compiled, algorithm, kernel_name, rank, dtype, grid)
    return compiled


def _warn_interpreted(kernel_name, rank):
    global _warned_interpreted
    if not _warned_interpreted:
        _warned_interpreted = True
        _log_rank(logging.WARNING, "aperture: iris.kernel_artifacts: IRIS_KERNEL_ARTIFACTS_DIR is set, but Triton "
                  "interprets kernels in this process (TRITON_INTERPRET=1), so there is no compiled kernel: nothing "
                  "is written for %s or any later launch. Run on a GPU without TRITON_INTERPRET to get artifacts.",
                  kernel_name, rank=rank)


def _get_kernel_name(kernel_fn) -> str:
    fn = getattr(kernel_fn, "fn", None)  # a JITFunction wraps the Python function
    return getattr(fn, "__name__", None) or getattr(kernel_fn, "__name__", None) or str(kernel_fn)


def _save(compiled, algorithm: str, kernel_name: str, rank: int, dtype, grid):
    """Writes ``compiled``'s artifacts under its directory, unless they are there already."""
    spec = _build_spec_dirname(compiled, dtype)
    codegen_hash = _codegen_hash(compiled)
    output_dir = _artifacts_dir / algorithm / kernel_name / f"rank_{rank}" / spec / codegen_hash
    if (output_dir / "metadata.json").exists():
        return
    metadata = _extract_metadata(compiled, algorithm, kernel_name, rank, grid, dtype)
    metadata["codegen_hash"] = codegen_hash
    _write_artifacts(output_dir, compiled, metadata)


def _sha12(data) -> str:
    return hashlib.sha256(data if isinstance(data, bytes) else data.encode("utf-8")).hexdigest()[:12]


def _codegen_hash(compiled) -> str:
    """12 hex digits naming the generated code: two kernels with the same constexprs but other code
    (another Triton, other options) get different directories."""
    asm = getattr(compiled, "asm", None) or {}
    for key in _CODEGEN_KEYS:
        if asm.get(key):
            return _sha12(asm[key])
    return _sha12(getattr(compiled, "hash", None) or "unknown")


def _build_spec_dirname(compiled, dtype=None) -> str:
    constexprs = _extract_constexprs(compiled)
    parts = [f"B{axis}{constexprs[f'BLOCK_SIZE_{axis}']}" for axis in "MNK" if f"BLOCK_SIZE_{axis}" in constexprs]
    dtype_name = _dtype_short_name(dtype)
    if dtype_name:
        parts.append(dtype_name)
    num_warps = getattr(compiled.metadata, "num_warps", None)
    if num_warps is not None:
        parts.append(f"w{num_warps}")
    if parts:
        return "_".join(parts)
    triton_hash = getattr(compiled, "hash", None)
    return triton_hash[:12] if triton_hash else "unknown"


def _dtype_short_name(dtype) -> Optional[str]:
    if dtype is None:
        return None
    name = str(dtype)
    return _DTYPE_SHORT_NAMES.get(name, name.replace("torch.", ""))


def _extract_constexprs(compiled) -> Dict[str, Any]:
    """The constexpr arguments by name. Triton keeps them in ``compiled.src.constants`` keyed by
    the argument's index path (``(i,)``), or by name."""
    src = getattr(compiled, "src", None)
    if src is None:
        return {}
    arg_names = getattr(getattr(src, "fn", None), "arg_names", None) or []
    result = {}
    for key, value in getattr(src, "constants", {}).items():
        if isinstance(key, tuple) and len(key) == 1 and 0 <= key[0] < len(arg_names):
            name = arg_names[key[0]]
        elif isinstance(key, str):
            name = key
        else:
            continue
        value = getattr(value, "value", value)  # a tl.constexpr holds its value
        if isinstance(value, (int, float, bool, str)):
            result[name] = value
    return result


def _extract_metadata(compiled, algorithm: str, kernel_name: str, rank: int, grid, dtype) -> dict:
    meta = compiled.metadata
    target = getattr(meta, "target", None)
    metadata = {
        "kernel_name": kernel_name,
        "algorithm": algorithm,
        "rank": rank,
        "hash": getattr(compiled, "hash", None),
        "target": {} if target is None else {"backend": getattr(target, "backend", str(target)),
                                             "arch": getattr(target, "arch", ""),
                                             "warp_size": getattr(target, "warp_size", None)},
        "constexprs": _extract_constexprs(compiled),
        "num_warps": getattr(meta, "num_warps", None),
        "num_stages": getattr(meta, "num_stages", None),
        "shared_memory_bytes": getattr(meta, "shared", None),
        "grid": list(grid) if grid and not callable(grid) else None,
        "timestamp": datetime.now(timezone.utc).isoformat(),
    }
    # Triton fills these when the kernel is first loaded on the device.
    if getattr(compiled, "n_regs", None) is not None:
        metadata["num_registers"] = compiled.n_regs
    if getattr(compiled, "n_spills", None) is not None:
        metadata["num_spills"] = compiled.n_spills
    if dtype is not None:
        metadata["dtype"] = str(dtype)
    return metadata


def _write_artifacts(output_dir: Path, compiled, metadata: dict):
    """Writes each IR the compiled kernel has (text or binary as Triton keeps it) and metadata.json."""
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    asm = getattr(compiled, "asm", None) or {}
    for filename, key in _ARTIFACT_FILES.items():
        content = asm.get(key)
        if isinstance(content, bytes):
            (output_dir / filename).write_bytes(content)
        elif content is not None:
            (output_dir / filename).write_text(content, encoding="utf-8")
    (output_dir / "metadata.json").write_text(json.dumps(metadata, indent=2, default=str), encoding="utf-8")


_init()

__all__ = ["iris_launch", "is_enabled"]
