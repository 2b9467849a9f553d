#!/usr/bin/env bash
# scripts/setup-deps.sh — install what building and testing aperture needs, and only what is missing.
#
# On a prepared machine this checks and returns in a second; on a fresh Debian/Ubuntu machine it
# runs one `apt-get update` and one `apt-get install`. Works as root, or through sudo.
#
#   APERTURE_SKIP_DEPS=1       check nothing, install nothing (you manage the machine yourself)
#   APERTURE_WITH_NVSHMEM=1    also pip-install NVSHMEM 3.4.5 (the GPU machine's) for the nvshmem
#                              provider; the default where nvcc is found, so that the provider
#                              compiles and links in CI too. APERTURE_WITH_NVSHMEM=0: never.
#   --with-nvshmem             the same as APERTURE_WITH_NVSHMEM=1
#   APERTURE_WITH_HIPCC=0      do not install Debian's hipcc, which the HIP compile check of the
#                              device headers (tests/hip) needs; installed by default (some 100 MB
#                              to download, 650 MB on disk). A failed install skips that check.
#   APERTURE_WITH_SLURM=0      do not install Slurm and munge (about 10 MB), which the srun test of
#                              tests/multinode needs; installed by default. A failed install skips it.
#
# The CUDA toolkit is not installed here: the build uses nvcc when it finds one
# (/usr/local/cuda/bin/nvcc, or CUDACXX) and builds the CPU parts without it otherwise.
set -euo pipefail

default_nvshmem=0
if command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; then default_nvshmem=1; fi
with_nvshmem="${APERTURE_WITH_NVSHMEM:-$default_nvshmem}"
for arg in "$@"; do
  case "$arg" in
    --with-nvshmem) with_nvshmem=1 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "setup-deps.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

if [[ "${APERTURE_SKIP_DEPS:-0}" == 1 ]]; then
  echo "setup-deps: APERTURE_SKIP_DEPS=1, not checking dependencies"
  exit 0
fi

# Debian package -> what proves it is there (a command, or a file for header/library packages).
declare -A probe=(
  [cmake]="cmd:cmake"
  [g++]="cmd:g++"
  [make]="cmd:make"
  [python3]="cmd:python3"
  [googletest]="file:/usr/src/googletest/CMakeLists.txt"
  [libgtest-dev]="file:/usr/include/gtest/gtest.h"
  [libgmock-dev]="file:/usr/include/gmock/gmock.h"
  [libopenmpi-dev]="file:/usr/include/x86_64-linux-gnu/openmpi/mpi.h|/usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h|/usr/include/aarch64-linux-gnu/openmpi/mpi.h|/usr/lib/aarch64-linux-gnu/openmpi/include/mpi.h"
  [openmpi-bin]="cmd:mpirun"
  # the simulated nodes of tests/multinode (scripts/simnodes.sh): ip, and nsenter/unshare
  [iproute2]="cmd:ip"
  [util-linux]="cmd:nsenter"
)
order=(cmake g++ make python3 googletest libgtest-dev libgmock-dev libopenmpi-dev openmpi-bin iproute2 util-linux)

is_present() {
  local pkg="$1" spec="${probe[$1]}"
  if command -v dpkg-query >/dev/null 2>&1 &&
     [[ "$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)" == installed ]]; then
    return 0
  fi
  case "$spec" in
    cmd:*) command -v "${spec#cmd:}" >/dev/null 2>&1 ;;
    file:*)
      local f
      IFS='|' read -ra files <<<"${spec#file:}"
      for f in "${files[@]}"; do [[ -e "$f" ]] && return 0; done
      return 1 ;;
  esac
}

missing=()
for pkg in "${order[@]}"; do
  is_present "$pkg" || missing+=("$pkg")
done

run_as_root() {
  if [[ "$(id -u)" == 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo -E "$@"
  else
    echo "setup-deps: need root to run '$*' and sudo is not available; install these yourself: ${missing[*]}" >&2
    exit 1
  fi
}

if ((${#missing[@]} == 0)); then
  echo "setup-deps: all dependencies present"
else
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup-deps: missing ${missing[*]} and apt-get is not available; install the equivalents" \
         "(CMake >= 3.25, a C++20 compiler, GoogleTest, Open MPI with its development files) yourself," \
         "or set APERTURE_SKIP_DEPS=1 if you know they are there" >&2
    exit 1
  fi
  echo "setup-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  run_as_root apt-get update -q
  run_as_root apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# ---- optional: GPU providers -------------------------------------------------------------------
# The nvshmem provider builds against the NVSHMEM wheel (cmake/nvshmem.cmake finds it through
# python3); without it the provider is simply not built. A failed install is reported, not fatal.
# (The nccl provider needs NCCL 2.28+ with nccl_device.h: the CUDA toolkit's, NCCL_HOME, or the
# nvidia-nccl-cu13 wheel that PyTorch brings.)
if [[ "$with_nvshmem" == 1 ]]; then
  if python3 -c 'import importlib.metadata as m; assert m.version("nvidia-nvshmem-cu13") == "3.4.5"' 2>/dev/null; then
    echo "setup-deps: nvidia-nvshmem-cu13 3.4.5 present"
  else
    echo "setup-deps: installing nvidia-nvshmem-cu13==3.4.5"
    python3 -m pip install --quiet "nvidia-nvshmem-cu13==3.4.5" ||
      echo "setup-deps: could not install nvidia-nvshmem-cu13==3.4.5; the nvshmem provider will not be built" >&2
  fi
fi

# ---- optional: hipcc, for the HIP compile check of the device headers (tests/hip) --------------
# Debian's hipcc (clang 15 with the ROCm device libraries) compiles for AMD GPUs; nothing here
# runs on one. Without hipcc the check is not configured. A failed install is reported, not fatal.
if [[ "${APERTURE_WITH_HIPCC:-1}" == 1 ]] && ! command -v hipcc >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "setup-deps: installing hipcc (for the HIP compile check)"
    began=$SECONDS
    export DEBIAN_FRONTEND=noninteractive
    # In a subshell: run_as_root exits where it cannot become root, and that is not fatal here.
    if (run_as_root apt-get install -y -q --no-install-recommends hipcc ||
        { run_as_root apt-get update -q && run_as_root apt-get install -y -q --no-install-recommends hipcc; }); then
      echo "setup-deps: hipcc installed in $((SECONDS - began)) s"
    else
      echo "setup-deps: could not install hipcc; the HIP compile check will not run" >&2
    fi
  else
    echo "setup-deps: no hipcc and no apt-get; the HIP compile check will not run" >&2
  fi
fi

# ---- optional: Slurm, for tests/multinode/slurm_test.sh ----------------------------------------
# A private Slurm cluster on simulated nodes checks that ranks srun starts form their job (with and
# without PMIx). The packages only; the test starts its own daemons and stops them. Without them
# the test is skipped (CI requires it: APERTURE_SLURM_REQUIRE=1). A failed install is reported.
if [[ "${APERTURE_WITH_SLURM:-1}" == 1 ]] && ! command -v slurmd >/dev/null 2>&1 &&
   ! [[ -x /usr/sbin/slurmd ]]; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "setup-deps: installing Slurm (slurmd slurmctld slurm-client munge: for the srun test)"
    began=$SECONDS
    export DEBIAN_FRONTEND=noninteractive
    if (run_as_root apt-get install -y -q --no-install-recommends slurmd slurmctld slurm-client munge ||
        { run_as_root apt-get update -q &&
          run_as_root apt-get install -y -q --no-install-recommends slurmd slurmctld slurm-client munge; }); then
      echo "setup-deps: Slurm installed in $((SECONDS - began)) s"
    else
      echo "setup-deps: could not install Slurm; the srun test will be skipped" >&2
    fi
  else
    echo "setup-deps: no Slurm and no apt-get; the srun test will be skipped" >&2
  fi
fi
