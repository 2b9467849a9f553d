"""Under `aperture launch`, torch.distributed.init_process_group works unchanged (the launcher
sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), next to an aperture Team; and
aperture's all_reduce agrees with torch's (gloo) element by element."""

import os

import pytest
import torch
import torch.distributed as dist

import aperture
from conftest import pattern

pytestmark = pytest.mark.skipif(os.environ.get("APERTURE_RANK") is None, reason="ranks not started by aperture launch")


def test_launcher_sets_torchruns_variables(team):
    assert int(os.environ["RANK"]) == team.rank
    assert int(os.environ["WORLD_SIZE"]) == team.size
    assert int(os.environ["LOCAL_RANK"]) == team.local_rank
    assert os.environ["MASTER_ADDR"] == "127.0.0.1"
    assert 0 < int(os.environ["MASTER_PORT"]) < 65536


def test_init_process_group_and_all_reduce_agree(team, host_provider):
    dist.init_process_group("gloo")  # env:// from the launcher's variables
    try:
        assert dist.get_rank() == team.rank and dist.get_world_size() == team.size
        n = 4099
        mine = torch.tensor([pattern(team.rank, i) for i in range(n)], dtype=torch.int64)
        theirs = mine.clone()
        dist.all_reduce(theirs)
        ours = host_provider.zeros(n, torch.int64)
        ours.copy_(mine)
        with aperture.Communicator(team, host_provider) as comm:
            comm.all_reduce(ours)
        assert torch.equal(ours, theirs)
        assert torch.equal(theirs, torch.tensor([sum(pattern(r, i) for r in range(team.size)) for i in range(n)]))
        host_provider.free(ours)
    finally:
        dist.destroy_process_group()
