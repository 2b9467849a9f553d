"""The job an Iris context runs in: torch.distributed's ranks when it is initialised, else the launcher's.

Iris takes its ranks from torch.distributed (its test runner and its examples initialise it,
often with a ``tcp://`` URL in workers that ``torch.multiprocessing`` spawned, which leaves no
launcher variables, or under torchrun). An aperture Team with torch.distributed's rank and size
is then made by giving Team.from_env the torchrun-style variables it reads (RANK, WORLD_SIZE,
MASTER_ADDR and a port of its own), with the address, port and job token chosen by rank 0 and
broadcast over torch.distributed. Without torch.distributed, Team.from_env() reads aperture
launch, mpirun, torchrun or srun, or makes a one-rank job.
"""

import os
import secrets
import socket

import aperture

_TEAM = None


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _team_from_torch_distributed(dist):
    rank, size = dist.get_rank(), dist.get_world_size()
    launcher_rank = os.environ.get("APERTURE_RANK") or os.environ.get("OMPI_COMM_WORLD_RANK") or \
        os.environ.get("RANK")
    launcher_size = os.environ.get("APERTURE_WORLD_SIZE") or os.environ.get("OMPI_COMM_WORLD_SIZE") or \
        os.environ.get("WORLD_SIZE")
    # aperture launch and mpirun describe this very job, hub included. torchrun's variables alone
    # do not: aperture's rendezvous would take the first free port after MASTER_PORT, which
    # nothing reserves, and a guessable token (TORCHELASTIC_RUN_ID). With torch.distributed up,
    # rank 0 picks a free port and a random token and sends both, unless APERTURE_MASTER_PORT
    # names the port.
    if launcher_rank == str(rank) and launcher_size == str(size) and (os.environ.get("APERTURE_RANK") or
                                                                       os.environ.get("OMPI_COMM_WORLD_RANK") or
                                                                       os.environ.get("APERTURE_MASTER_PORT")):
        return aperture.Team.from_env()
    if size == 1:
        return aperture.Team.single()
    # Rank 0 names where aperture's rendezvous listens; torch.distributed carries it to the others.
    plan = [None]
    if rank == 0:
        address = os.environ.get("MASTER_ADDR") or socket.gethostbyname(socket.gethostname())
        plan = [(address, _free_port(), secrets.token_hex(8))]
    # Over gloo, whatever the job's backend: NCCL would need each rank's GPU chosen first and
    # refuses two ranks on one GPU, neither of which this host-side plan has to care about.
    group = None if dist.get_backend() == "gloo" else dist.new_group(backend="gloo")
    dist.broadcast_object_list(plan, src=0, group=group)
    address, port, token = plan[0]
    for name in ("APERTURE_RANK", "APERTURE_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"):
        os.environ.pop(name, None)  # another launcher's variables would win over these
    # MASTER_PORT stays torch's where torchrun set it (its store listens there); aperture's
    # rendezvous is at APERTURE_MASTER_PORT.
    os.environ.setdefault("MASTER_PORT", str(port - 1 if port > 1 else port))
    os.environ.update({"RANK": str(rank), "WORLD_SIZE": str(size), "MASTER_ADDR": address,
                       "APERTURE_MASTER_PORT": str(port), "APERTURE_JOB_TOKEN": token})
    os.environ.setdefault("LOCAL_RANK", str(rank % max(1, _local_size_guess(size))))
    return aperture.Team.from_env()


def _local_size_guess(size):
    try:
        import torch

        return torch.cuda.device_count() or size
    except Exception:  # noqa: BLE001 - no torch CUDA: every rank on this machine
        return size


def process_team():
    """One Team per process, shared by every Iris context of the process."""
    global _TEAM
    if _TEAM is None:
        dist = None
        try:
            import torch.distributed as dist

            if not (dist.is_available() and dist.is_initialized()):
                dist = None
        except ImportError:
            dist = None
        _TEAM = _team_from_torch_distributed(dist) if dist is not None else aperture.Team.from_env()
    return _TEAM
