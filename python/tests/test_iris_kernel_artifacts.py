"""aperture.iris's kernel_artifacts (Iris's ``iris_launch`` and IRIS_KERNEL_ARTIFACTS_DIR): the
launch's result, what is written for a compiled kernel (the directory layout, each IR file, the
metadata) and that a relaunch writes nothing, what the interpreter does instead (nothing written,
one warning), the helpers Iris's unit tests call, and the import paths. A kernel compiled for
sm_90 in a child process (no GPU needed) is dumped as one compiled on a GPU is."""

import hashlib
import json
import logging
import os
import subprocess
import sys
import types

import pytest
import torch

if __name__ == "__main__":
    os.environ.pop("TRITON_INTERPRET", None)  # the child compiles (see compiled_dump below)
    INTERPRETED, DEVICE = False, "cuda"
else:
    # triton_world before triton: it decides whether Triton interprets this process's kernels.
    from triton_world import DEVICE, INTERPRETED, compiled_in_child, job_size

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import aperture.iris as iris  # noqa: E402
from aperture.iris.tracing import kernel_artifacts  # noqa: E402

pytestmark = pytest.mark.iris


@triton.jit
def add_one_kernel(src, dst, n, BLOCK_SIZE_M: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask) + 1, mask=mask)


@pytest.fixture
def artifacts_dir(tmp_path, monkeypatch):
    """Artifacts enabled into a fresh directory, as IRIS_KERNEL_ARTIFACTS_DIR at import would."""
    monkeypatch.setattr(kernel_artifacts, "_artifacts_dir", tmp_path)
    monkeypatch.setattr(kernel_artifacts, "_enabled", True)
    monkeypatch.setattr(kernel_artifacts, "_warned_interpreted", False)
    return tmp_path


def launch(n=37, dtype=torch.float32, block=16, rank=3):
    src = torch.arange(n, dtype=dtype, device=DEVICE)
    dst = torch.zeros_like(src)
    compiled = kernel_artifacts.iris_launch(add_one_kernel, (triton.cdiv(n, block),), src, dst, n,
                                            algorithm="add_one", rank=rank, dtype=dtype, BLOCK_SIZE_M=block,
                                            num_warps=4)
    assert torch.equal(dst.cpu(), (src + 1).cpu())  # launched as kernel[grid](...) launches
    return compiled


def files_under(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


# ---- a launch --------------------------------------------------------------------------------------
def test_a_disabled_launch_only_launches(tmp_path, monkeypatch):
    monkeypatch.setattr(kernel_artifacts, "_enabled", False)
    monkeypatch.setattr(kernel_artifacts, "_artifacts_dir", tmp_path)
    compiled = launch()
    assert (compiled is None) == INTERPRETED
    assert files_under(tmp_path) == []


@pytest.mark.no_gpu  # the interpreter's behaviour (compiled kernels are the GPU test's)
def test_interpreted_launches_write_nothing_and_say_so_once(artifacts_dir, caplog):
    with caplog.at_level(logging.WARNING, logger="iris"):
        assert launch() is None and launch(dtype=torch.int32) is None
    assert files_under(artifacts_dir) == []
    warnings = [r.getMessage() for r in caplog.records if "IRIS_KERNEL_ARTIFACTS_DIR" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "interprets kernels in this process (TRITON_INTERPRET=1)" in warnings[0]
    assert "nothing is written for add_one_kernel" in warnings[0]


@pytest.mark.gpu
@pytest.mark.skipif(INTERPRETED, reason="needs a GPU: kernels are interpreted here")
def test_a_compiled_launch_writes_what_triton_compiled(artifacts_dir):
    compiled = launch()
    assert isinstance(compiled, triton.compiler.CompiledKernel)
    spec_dir = artifacts_dir / "add_one" / "add_one_kernel" / "rank_3" / "BM16_fp32_w4"
    check_dump(spec_dir, compiled.asm["ptx"], compiled.asm["cubin"], grid=[3])
    metadata_file = next(spec_dir.rglob("metadata.json"))
    written = metadata_file.stat().st_mtime_ns
    launch()  # the same code again: nothing rewritten, no second directory
    assert metadata_file.stat().st_mtime_ns == written and len(list(artifacts_dir.rglob("metadata.json"))) == 1
    launch(dtype=torch.float16, block=32)  # another specialisation: its own directory
    assert (artifacts_dir / "add_one" / "add_one_kernel" / "rank_3" / "BM32_fp16_w4").is_dir()


def check_dump(spec_dir, ptx, cubin, grid):
    """One codegen directory named by the PTX's hash, holding every stage and the metadata."""
    (codegen_dir,) = list(spec_dir.iterdir())
    assert codegen_dir.name == hashlib.sha256(ptx.encode()).hexdigest()[:12]
    assert sorted(p.name for p in codegen_dir.iterdir()) == ["kernel.cubin", "kernel.llir", "kernel.ptx",
                                                            "kernel.ttgir", "kernel.ttir", "metadata.json"]
    assert (codegen_dir / "kernel.ptx").read_text() == ptx and ".entry add_one_kernel" in ptx
    assert (codegen_dir / "kernel.cubin").read_bytes() == cubin
    assert "tt.func" in (codegen_dir / "kernel.ttir").read_text()
    metadata = json.loads((codegen_dir / "metadata.json").read_text())
    assert metadata["kernel_name"] == "add_one_kernel" and metadata["algorithm"] == "add_one"
    assert metadata["rank"] == 3 and metadata["constexprs"] == {"BLOCK_SIZE_M": 16}
    assert metadata["target"]["backend"] == "cuda" and metadata["target"]["warp_size"] == 32
    assert metadata["num_warps"] == 4 and metadata["grid"] == grid and metadata["dtype"] == "torch.float32"
    assert metadata["codegen_hash"] == codegen_dir.name


@pytest.fixture(scope="module")
def compiled_dump(tmp_path_factory):
    root = tmp_path_factory.mktemp("sm90-artifacts")
    return root, compiled_in_child(__file__, KERNEL_ARTIFACTS_ROOT=str(root))


def test_a_kernel_compiled_for_sm_90_is_dumped_as_on_a_gpu(compiled_dump):
    """Triton's CompiledKernel for sm_90 (compiled in a child, no GPU needed) through the same writer."""
    root, compiled = compiled_dump
    spec_dir = root / "add_one" / "add_one_kernel" / "rank_3" / "BM16_fp32_w4"
    check_dump(spec_dir, compiled["ptx"], bytes.fromhex(compiled["cubin"]), grid=[3])


# ---- the helpers Iris's unit tests call, on stand-ins for CompiledKernel -----------------------------
def fake_compiled(asm=None, constants=None, arg_names=(), num_warps=4, kernel_hash="0123456789abcdef"):
    meta = types.SimpleNamespace(num_warps=num_warps, num_stages=3, shared=0)
    compiled = types.SimpleNamespace(asm={"ptx": "ret;"} if asm is None else asm, metadata=meta, hash=kernel_hash)
    if constants is not None:
        compiled.src = types.SimpleNamespace(constants=constants, fn=types.SimpleNamespace(arg_names=list(arg_names)))
    return compiled


def sha12(data):
    return hashlib.sha256(data).hexdigest()[:12]


def test_codegen_hash_is_the_device_assembly_then_the_binary_then_tritons_hash():
    assert kernel_artifacts._codegen_hash(fake_compiled({"ptx": "ret;", "cubin": b"\x7fELF"})) == sha12(b"ret;")
    assert kernel_artifacts._codegen_hash(fake_compiled({"cubin": b"\x7fELF"})) == sha12(b"\x7fELF")
    assert kernel_artifacts._codegen_hash(fake_compiled({"amdgcn": "s_endpgm"})) == sha12(b"s_endpgm")
    assert kernel_artifacts._codegen_hash(fake_compiled({"hsaco": b"blob"})) == sha12(b"blob")
    assert kernel_artifacts._codegen_hash(fake_compiled({}, kernel_hash="deadbeef")) == sha12(b"deadbeef")
    assert kernel_artifacts._codegen_hash(fake_compiled({}, kernel_hash=None)) == sha12(b"unknown")


def test_spec_dirname_names_block_sizes_dtype_and_warps():
    names = ["x", "BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K"]
    full = fake_compiled(constants={(1,): 128, (2,): 256, (3,): tl.constexpr(32)}, arg_names=names, num_warps=8)
    assert kernel_artifacts._build_spec_dirname(full, torch.bfloat16) == "BM128_BN256_BK32_bf16_w8"
    by_name = fake_compiled(constants={"BLOCK_SIZE_N": 64}, num_warps=2)
    assert kernel_artifacts._build_spec_dirname(by_name) == "BN64_w2"
    nothing = fake_compiled(constants={})
    nothing.metadata = types.SimpleNamespace()
    assert kernel_artifacts._build_spec_dirname(nothing) == "0123456789ab"
    assert [kernel_artifacts._dtype_short_name(d) for d in (torch.float16, torch.float8_e4m3fn,
                                                             torch.float8_e4m3fnuz, torch.complex64, None)] == \
        ["fp16", "fp8e4m3fn", "fp8e4m3", "complex64", None]


def test_save_writes_each_stage_once_and_another_codegen_apart(artifacts_dir):
    ptx_kernel = fake_compiled({"ttir": "module {}", "ptx": "ret;", "cubin": b"\x00\x01"},
                               constants={(0,): 64}, arg_names=["BLOCK_SIZE_M"])
    kernel_artifacts._save(ptx_kernel, "algo", "k", 1, torch.int32, (8, 2))
    codegen_dir = artifacts_dir / "algo" / "k" / "rank_1" / "BM64_i32_w4" / sha12(b"ret;")
    assert sorted(p.name for p in codegen_dir.iterdir()) == ["kernel.cubin", "kernel.ptx", "kernel.ttir",
                                                            "metadata.json"]
    assert (codegen_dir / "kernel.cubin").read_bytes() == b"\x00\x01"
    metadata = json.loads((codegen_dir / "metadata.json").read_text())
    assert metadata["grid"] == [8, 2] and metadata["num_stages"] == 3 and metadata["dtype"] == "torch.int32"
    written = (codegen_dir / "metadata.json").stat().st_mtime_ns
    kernel_artifacts._save(ptx_kernel, "algo", "k", 1, torch.int32, (8, 2))
    assert (codegen_dir / "metadata.json").stat().st_mtime_ns == written
    kernel_artifacts._save(fake_compiled({"ptx": "exit;"}, constants={(0,): 64}, arg_names=["BLOCK_SIZE_M"]),
                           "algo", "k", 1, torch.int32, lambda meta: (1,))
    assert len(list(artifacts_dir.rglob("metadata.json"))) == 2


# ---- where programs find it ------------------------------------------------------------------------
def test_one_module_at_each_of_iriss_paths():
    import aperture.iris.host.tracing
    import aperture.iris.host.tracing.kernel_artifacts as host_path

    assert host_path is kernel_artifacts and aperture.iris.host.tracing.kernel_artifacts is kernel_artifacts
    assert iris.kernel_artifacts is kernel_artifacts
    assert kernel_artifacts.is_enabled() == bool(os.environ.get("IRIS_KERNEL_ARTIFACTS_DIR", "").strip())


def test_python_m_aperture_iris_reads_the_variable_at_import(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text("import iris, iris.tracing.kernel_artifacts as a\n"
                    "from iris.host.tracing.kernel_artifacts import iris_launch, is_enabled\n"
                    "import iris.host.tracing.kernel_artifacts as b\n"
                    "assert a is b is iris.kernel_artifacts and iris_launch is a.iris_launch\n"
                    "print(is_enabled(), a._artifacts_dir)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("APERTURE_RANK", "APERTURE_WORLD", "RANK",
                                                                    "WORLD_SIZE", "OMPI_", "PMI", "IRIS_KERNEL"))}
    for value, expect in (("", "False None"), (str(tmp_path / "dump"), f"True {tmp_path / 'dump'}")):
        done = subprocess.run([sys.executable, "-m", "aperture.iris", str(prog)], capture_output=True, text=True,
                              env=dict(env, IRIS_KERNEL_ARTIFACTS_DIR=value), timeout=300)
        assert done.returncode == 0 and done.stdout.strip() == expect, done.stderr[-2000:]


if __name__ != "__main__" and (job_size() > 1 or (INTERPRETED and "APERTURE_WORLD_SIZE" in os.environ)):
    # These start processes of their own: once, from a one-rank job (triton_world.only_in_one_rank_jobs).
    del test_a_kernel_compiled_for_sm_90_is_dumped_as_on_a_gpu, test_python_m_aperture_iris_reads_the_variable_at_import


if __name__ == "__main__":
    # The child of compiled_dump: compile add_one_kernel for sm_90 and dump it with the writer.
    import pathlib

    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    source = ASTSource(add_one_kernel, {"src": "*fp32", "dst": "*fp32", "n": "i32", "BLOCK_SIZE_M": "constexpr"},
                       constexprs={"BLOCK_SIZE_M": 16})
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
    kernel_artifacts._artifacts_dir = pathlib.Path(os.environ["KERNEL_ARTIFACTS_ROOT"])
    kernel_artifacts._save(compiled, "add_one", "add_one_kernel", 3, torch.float32, (3,))
    print(json.dumps({"ptx": compiled.asm["ptx"], "cubin": compiled.asm["cubin"].hex()}))
