# scripts/python-env.sh — sourced by scripts/python-test.sh and scripts/pytest-ranks.sh: the
# interpreter ($PYTHON, default python3) and the loader path torch needs.
#
# torch's PyPI wheel loads CUDA libraries at `import torch`, GPU or not. python-test.sh installs
# it without the 3 GB of them where this machine's CUDA toolkit has most (on the loader's path),
# plus the wheels of the three the toolkit lacks (cuFile, cuSPARSELt, NVSHMEM); their folders go
# on LD_LIBRARY_PATH here. Where torch came with its dependencies, they are simply not needed.
export PYTHON=${PYTHON:-python3}
aperture_python_site=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null || true)
if [[ -n $aperture_python_site ]]; then
  for aperture_dir in nvidia/cu13/lib nvidia/cusparselt/lib nvidia/nvshmem/lib; do
    case ":${LD_LIBRARY_PATH:-}:" in
      *":$aperture_python_site/$aperture_dir:"*) ;;
      *) LD_LIBRARY_PATH="$aperture_python_site/$aperture_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
    esac
  done
  export LD_LIBRARY_PATH
fi
unset aperture_python_site aperture_dir
