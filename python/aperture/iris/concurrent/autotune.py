"""``iris.concurrent.autotune``: the ``tune=True`` of iris.concurrent.gemm's ops. It times a few
(gemm_wgs, gemm_block) configurations of the op on the device and keeps the fastest, per shape,
in a JSON tuning database, so that a later launch of that shape is a lookup.

Iris ranks the candidates with AMD's origami cost models (``iris.concurrent.predictor``) and,
where those are missing, times a grid of GEMM/collective program splits at the op's own tile;
origami models AMD's GPUs only, so here the grid is what is timed: gemm_wgs at 1/2, 5/8, 3/4,
7/8 and all of num_wgs, plus the op's untuned default, which the tuner therefore never loses to.
The database is where Iris keeps it: ``$IRIS_CONCURRENT_CACHE``, else
``$XDG_CACHE_HOME/iris/concurrent/autotune.json`` (``~/.cache/...`` without XDG_CACHE_HOME),
else ``$TMPDIR/iris_concurrent_autotune.json``. ``IRIS_CONCURRENT_TUNE_TOPK`` (8),
``IRIS_CONCURRENT_TUNE_FORCE`` (0), ``IRIS_CONCURRENT_TUNE_NREP`` (20) and
``IRIS_CONCURRENT_TUNE_NWARMUP`` (5) as in Iris.

Every rank times the same candidates (each timed call includes the collective, so all ranks must
take part): ranks that find the shape in their databases use it only when every rank does
(``tune_for``); otherwise all of them time it again. What each picks is its own: the choice
touches only its local GEMM.
"""

import json
import os
import tempfile
import threading

import torch

__all__ = ["tune_config", "topk_configs", "cache_path", "load_db", "clear"]

_DEFAULT_TOPK = 8
_SPLITS = (0.5, 0.625, 0.75, 0.875, 1.0)

_db_lock = threading.Lock()
_db_cache = None  # this process's copy of the database


def cache_path():
    """The tuning database's file (module docstring: the order it is looked for in)."""
    explicit = os.environ.get("IRIS_CONCURRENT_CACHE")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "iris", "concurrent", "autotune.json")
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return path
    except OSError:
        return os.path.join(tempfile.gettempdir(), "iris_concurrent_autotune.json")


def load_db():
    """The database as a dict, read once per process (an unreadable file reads as empty)."""
    global _db_cache
    if _db_cache is None:
        try:
            with open(cache_path()) as f:
                _db_cache = json.load(f)
        except (OSError, ValueError):
            _db_cache = {}
    return _db_cache


def _save_db(db):
    path = cache_path()
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        partial = f"{path}.{os.getpid()}.tmp"  # renamed into place: a reader never sees half a file
        with open(partial, "w") as f:
            json.dump(db, f, indent=2, sort_keys=True)
        os.replace(partial, path)
    except OSError:
        pass  # a database that cannot be written only costs a later run the timing


def clear():
    """Forgets this process's copy and deletes the file."""
    global _db_cache
    _db_cache = None
    try:
        os.remove(cache_path())
    except OSError:
        pass


def _make_key(shape, mode, num_wgs, arch, extra=None):
    """The database key of one tuning point (Iris's layout of it)."""
    parts = [f"arch={arch}", f"world={shape['world']}", f"nwg={num_wgs}", f"mode={mode}",
             f"coll={shape['collective']}", f"g={shape['gemm_m']}x{shape['gemm_n']}x{shape['gemm_k']}",
             f"c={shape['comm_m']}x{shape['comm_n']}"]
    return "|".join(parts + ([str(extra)] if extra else []))


def default_split(mode, num_wgs, comm_wgs, cu_count):
    """The programs an untuned launch gives each queue, (gemm_wgs, comm_wgs): fused, 3/4 of
    num_wgs start on the GEMM (comm_wgs unused); concurrent, the collective's kernel gets comm_wgs
    (1/8 of the SMs unless given) and the GEMM's the other SMs."""
    if mode == "fused":
        return (num_wgs * 3) // 4, None
    comm = max(1, cu_count // 8) if comm_wgs is None else comm_wgs
    return max(1, cu_count - comm), comm


def _int_env(name, default):
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return default


def topk_configs(shape, num_wgs, k=_DEFAULT_TOPK, candidates=None, mt_candidates=None,
                 default_gemm_block=(256, 256, 64)):
    """Up to ``k`` candidate configurations ``{gemm_wgs, gemm_block}``: the split grid (module
    docstring) at ``default_gemm_block``, or the ``candidates`` gemm_wgs values given. Iris's
    origami ranking (``mt_candidates``, the tiles it co-explores) needs AMD's models: not done."""
    splits = candidates if candidates is not None else [max(1, min(num_wgs, round(num_wgs * f))) for f in _SPLITS]
    out = []
    for gemm_wgs in splits:
        config = {"gemm_wgs": int(gemm_wgs), "gemm_block": tuple(default_gemm_block)}
        if config not in out:
            out.append(config)
    return out[:k]


def tune_config(*, run, shape, mode, num_wgs, barrier_fn=lambda: None, default_gemm_block=(256, 256, 64),
                default_gemm_wgs=None, arch="unknown", k=None, candidates=None, mt_candidates=None, extra_key=None,
                force=None, cache=True, n_warmup=None, n_repeat=None):
    """The fastest ``{gemm_wgs, gemm_block}`` for one shape: the database's entry when there is one
    (unless ``force``), else each candidate and the op's default timed through ``run(cfg)`` with
    iris.do_bench (median), the winner stored. Returns the config with ``measured_ms`` and
    ``cached``. A candidate that fails raises (Iris skips it): on one rank only, skipping would
    leave the ranks timing different calls."""
    k = _int_env("IRIS_CONCURRENT_TUNE_TOPK", _DEFAULT_TOPK) if k is None else k
    force = bool(_int_env("IRIS_CONCURRENT_TUNE_FORCE", 0)) if force is None else force
    n_warmup = _int_env("IRIS_CONCURRENT_TUNE_NWARMUP", 5) if n_warmup is None else n_warmup
    n_repeat = _int_env("IRIS_CONCURRENT_TUNE_NREP", 20) if n_repeat is None else n_repeat
    key = _make_key(shape, mode, num_wgs, arch, extra_key)
    with _db_lock:
        hit = load_db().get(key) if cache and not force else None
    if hit is not None:
        return {"gemm_wgs": int(hit["config"]["gemm_wgs"]), "gemm_block": tuple(hit["config"]["gemm_block"]),
                "measured_ms": hit.get("measured_ms"), "cached": True}
    from ..util import do_bench  # only here: a lookup needs neither torch's device nor the package

    configs = topk_configs(shape, num_wgs, k, candidates, mt_candidates, default_gemm_block)
    default = {"gemm_wgs": int((num_wgs * 3) // 4 if default_gemm_wgs is None else default_gemm_wgs),
               "gemm_block": tuple(default_gemm_block)}
    if default not in configs:
        configs.append(default)
    timed = sorted((float(do_bench(lambda c=c: run(c), barrier_fn=barrier_fn, n_warmup=n_warmup,
                                   n_repeat=n_repeat, return_mode="median")), i)
                   for i, c in enumerate(configs))
    best_ms, best = timed[0][0], configs[timed[0][1]]
    if cache:
        with _db_lock:
            db = load_db()
            db[key] = {"config": {"gemm_wgs": best["gemm_wgs"], "gemm_block": list(best["gemm_block"])},
                       "measured_ms": best_ms, "n_candidates": len(configs),
                       "candidates_ms": [{"gemm_wgs": configs[i]["gemm_wgs"],
                                          "gemm_block": list(configs[i]["gemm_block"]), "ms": ms}
                                         for ms, i in timed]}
            _save_db(db)
    return {**best, "measured_ms": best_ms, "cached": False}


def _arch(device):
    if device.type != "cuda":
        return "cpu"
    return torch.cuda.get_device_properties(device).name


def tune_for(shmem, run, A, B, comm_src, collective, settings):
    """tune_config for one call of an iris.concurrent.gemm op (``settings``: its launch settings),
    with the ranks agreeing first on whether the database answers for all of them."""
    mode, num_wgs = settings["mode"], settings["num_wgs"]
    cu_count = shmem.get_cu_count()
    programs = num_wgs if num_wgs is not None else cu_count
    shape = {"gemm_m": int(A.shape[0]), "gemm_n": int(B.shape[1]), "gemm_k": int(A.shape[1]),
             "comm_m": int(comm_src.shape[0]), "comm_n": int(comm_src.shape[1]), "collective": collective,
             "world": shmem.get_num_ranks()}
    arch = _arch(A.device)
    force = bool(_int_env("IRIS_CONCURRENT_TUNE_FORCE", 0))
    with _db_lock:
        known = not force and _make_key(shape, mode, programs, arch) in load_db()
    everywhere = all(flag == b"1" for flag in shmem.team.allgather(b"1" if known else b"0"))
    default_gemm_wgs, _ = default_split(mode, programs, settings.get("comm_wgs"), cu_count)
    return tune_config(run=run, shape=shape, mode=mode, num_wgs=programs, barrier_fn=shmem.barrier,
                       default_gemm_block=settings["gemm_block"], default_gemm_wgs=default_gemm_wgs, arch=arch,
                       force=force or not everywhere)
