"""The ranks of one run: a job per num_ranks value, or the ranks a launcher already started.

A job is started as Iris's test runner starts one: torch.multiprocessing spawns the workers,
which join torch.distributed over a tcp:// URL (NCCL with a GPU each, gloo without a GPU) and make
an aperture.iris context; aperture.iris takes its ranks from torch.distributed. Workers import
the benchmark program afresh, through the ``iris`` shim when it runs under
``python -m aperture.iris``, so the benchmark functions reach them by name.
"""

import os
import pickle
import socket
import tempfile

import torch

import aperture

from ..util import is_simulation_env
from ._envs import LAUNCHER_VARIABLES
from ._errors import BenchRunError, refuse
from ._measure import run_world


def launched_here():
    """Whether this process is already one rank of a job (torchrun, aperture launch, mpirun, an srun
    step of several tasks): the runner then runs in it instead of starting a job of its own."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return True
    if all(os.environ.get(k) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE")):
        return True
    if os.environ.get("SLURM_PROCID") and os.environ.get("SLURM_STEP_NUM_TASKS", "1") != "1":
        return True  # as Team.from_env reads srun: a batch script's shell has no step
    return any(os.environ.get(k) for k in ("APERTURE_RANK", "OMPI_COMM_WORLD_RANK"))


def rank_limit():
    """How many ranks a job may have here: one per GPU, or one per CPU core without a GPU.
    IRIS_SIMULATION=1 (Iris's switch for ranks that share a device) lifts the limit."""
    if is_simulation_env():
        return None, ""
    if torch.cuda.is_available():
        n = torch.cuda.device_count()
        return n, f"{n} GPU(s) here (one rank per GPU)"
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        n = os.cpu_count() or 1
    return n, f"no GPU and {n} CPU core(s) here (one rank per core)"


def check_num_ranks(values):
    """Refuses, before any job starts, a job size this machine cannot hold."""
    limit, why = rank_limit()
    too_many = sorted(v for v in values if limit is not None and v > limit)
    if too_many:
        fits = sorted(v for v in values if v <= limit)
        hint = (f"--skip_num_ranks={','.join(map(str, too_many))}" if fits
                else f"--axis_num_ranks={','.join(map(str, range(1, limit + 1)))}")
        refuse(f"num_ranks={','.join(map(str, too_many))} needs more ranks than this machine allows: {why}. "
               f"Pass {hint} (or IRIS_SIMULATION=1 to let ranks share a device)")


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(local_rank, world_size, url, job, job_env, results_path):
    import torch.distributed as dist

    for name in LAUNCHER_VARIABLES:
        os.environ.pop(name, None)
    # What an Iris benchmark may read, as torchrun-style workers have it.
    os.environ.update(RANK=str(local_rank), LOCAL_RANK=str(local_rank), WORLD_SIZE=str(world_size),
                      LOCAL_WORLD_SIZE=str(world_size))
    options = {}
    backend = "gloo"
    if torch.cuda.is_available():
        devices = torch.cuda.device_count()
        device = local_rank % devices
        torch.cuda.set_device(device)
        if world_size <= devices:  # NCCL refuses ranks that share a GPU; those stay on gloo
            backend = "nccl"
            options["device_id"] = torch.device("cuda", device)
    dist.init_process_group(backend=backend, init_method=url, world_size=world_size, rank=local_rank, **options)
    try:
        from .. import iris as make_context

        ctx = make_context(job["heap_size"])
        results = run_world(ctx, job["benchmarks"], job["selection"], job["n_warmup"], job["n_repeat"],
                            job["benchmark_filter"], job_env)
        if local_rank == 0:
            with open(results_path, "wb") as f:
                pickle.dump(results, f)
        ctx.barrier()
    finally:
        dist.destroy_process_group()


def spawn(num_ranks, job, job_env=None):
    """Runs ``job`` (a dict: benchmarks, selection, heap_size, n_warmup, n_repeat, benchmark_filter)
    in a new job of ``num_ranks`` ranks, started with the variables of ``job_env`` (an @env
    combination) set; returns rank 0's Results."""
    import torch.multiprocessing as mp

    job_env = dict(job_env or {})
    run = f"{num_ranks}-rank run" + (f" with {' '.join(f'{k}={v}' for k, v in job_env.items())}" if job_env else "")
    url = f"tcp://127.0.0.1:{_free_port()}"
    fd, results_path = tempfile.mkstemp(prefix="iris-bench-", suffix=".pkl")
    os.close(fd)
    # The workers inherit this process's environment when they start: set for them, then restored.
    saved = {name: os.environ.get(name) for name in job_env}
    os.environ.update(job_env)
    try:
        try:
            mp.spawn(_worker, args=(num_ranks, url, job, job_env, results_path), nprocs=num_ranks, join=True)
        except mp.ProcessRaisedException as e:
            # torch stops the other ranks; the rank's own traceback says what went wrong.
            raise BenchRunError(f"aperture: iris.bench: the {run} failed in rank {e.error_index}:\n"
                                f"{e.msg.strip()}", code=aperture.ErrorCode.internal) from None
        except mp.ProcessExitedException as e:
            raise BenchRunError(f"aperture: iris.bench: the {run} failed: rank {e.error_index} "
                                f"exited with code {e.exit_code}", code=aperture.ErrorCode.internal) from None
        with open(results_path, "rb") as f:
            return pickle.load(f)
    finally:
        os.unlink(results_path)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run_launched(job, check_world):
    """Runs ``job`` in the ranks a launcher started (this process is one), each @env sweep at the
    combination this environment has: joins torch.distributed where the launcher describes a
    torchrun-style job and it is not joined yet, and calls ``check_world(world_size, rank)`` before
    the sweep. Returns this rank's Results and rank."""
    import torch.distributed as dist

    joined_here = False
    if not dist.is_initialized() and os.environ.get("MASTER_ADDR") and os.environ.get("MASTER_PORT") and \
            os.environ.get("RANK") and os.environ.get("WORLD_SIZE"):
        backend = "gloo"
        if torch.cuda.is_available():
            local = int(os.environ.get("LOCAL_RANK", "0"))
            torch.cuda.set_device(local % torch.cuda.device_count())
            if int(os.environ.get("LOCAL_WORLD_SIZE", os.environ["WORLD_SIZE"])) <= torch.cuda.device_count():
                backend = "nccl"
        dist.init_process_group(backend=backend)
        joined_here = True
    try:
        from .. import iris as make_context

        ctx = make_context(job["heap_size"])
        check_world(ctx.get_num_ranks(), ctx.get_rank())
        results = run_world(ctx, job["benchmarks"], job["selection"], job["n_warmup"], job["n_repeat"],
                            job["benchmark_filter"])
        ctx.barrier()
        return results, ctx.get_rank()
    finally:
        if joined_here:
            dist.destroy_process_group()
