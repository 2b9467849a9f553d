"""Tests that start a job of their own, the way Iris's test runner starts one: workers from
torch.multiprocessing, torch.distributed over a tcp:// URL, no launcher variables, and the
program run through `python -m aperture.iris` so that it imports ``iris``."""

import os
import subprocess
import sys
import textwrap

import pytest

# Whether this test process is one rank of a larger job, whichever launcher made it; a test that
# starts a job of its own runs only from a one-rank job (its children must not join this one).
IN_A_JOB = any(int(os.environ.get(name, "1")) > 1 for name in ("APERTURE_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "WORLD_SIZE"))


def one_rank_job_only(what):
    """Marks a test that starts processes of its own (``what`` says which): skipped in a larger
    job, and marked ``multiprocess``, which a run can select or leave out (scripts/gpu-check.sh
    runs these beside the rest at one rank: each waits mostly on its children)."""
    def mark(test):
        test = pytest.mark.skipif(IN_A_JOB, reason=f"only in a one-rank job: {what}")(test)
        return pytest.mark.multiprocess(test)
    return mark


# Every launcher's variables, dropped from such a child's environment: aperture launch's, torchrun's
# and mpirun's (an MPI child that inherits them tries to join the parent's job and aborts).
LAUNCHER_VARIABLES = ("APERTURE_RANK", "APERTURE_WORLD", "APERTURE_LOCAL", "APERTURE_HUB", "APERTURE_JOB",
                      "APERTURE_NODE", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                      "MASTER_PORT", "OMPI_COMM_WORLD", "OMPI_MCA_orte", "OMPI_MCA_ess", "OMPI_MCA_pmix", "PMIX",
                      "OMPI_APP_CTX", "OMPI_FIRST_RANKS", "OMPI_FILE_LOCATION", "OMPI_UNIVERSE", "OMPI_NUM_APP_CTX")


def child_environment(**extra):
    """This process's environment without any launcher's variables, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_VARIABLES)}
    env.update(extra)
    return env


_MAIN = '''

if __name__ == "__main__":
    import socket
    import torch.multiprocessing as mp

    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    mp.spawn(worker, args=({ranks}, f"tcp://127.0.0.1:{{port}}"), nprocs={ranks})
    print({done!r})
'''


def run_spawned_job(path, worker_source, ranks, env, timeout):
    """Writes to ``path`` a program of ``worker_source`` (which defines ``worker(rank, world,
    url)``) that spawns ``ranks`` workers, runs it through the shim in ``env``, and fails the test
    unless every worker returned."""
    done = f"{path.stem}: {ranks} workers returned"
    path.write_text(textwrap.dedent(worker_source) + _MAIN.format(ranks=ranks, done=done))
    run = subprocess.run([sys.executable, "-m", "aperture.iris", str(path)], capture_output=True, text=True, env=env,
                         timeout=timeout)
    assert run.returncode == 0, run.stdout + run.stderr[-6000:]
    assert done in run.stdout, run.stdout
