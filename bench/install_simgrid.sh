#!/usr/bin/env bash
# Install SimGrid's Python bindings for bench/simgrid_check.py (the recipe in bench/README.md).
# SimGrid is compiled from source by pip: about 10-20 minutes on 2 cores. Not needed by
# gridcoll itself, its tests or CI.
# Usage: bench/install_simgrid.sh    (as root, or with sudo for apt-get)
set -euo pipefail
sudo=""
if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
# Boost headers (SimGrid's build needs them); cmake and a C++ compiler if missing.
$sudo apt-get update
$sudo apt-get install -y libboost-dev cmake g++
pip install wheel 'pybind11<3'
pip install --no-build-isolation simgrid
# The bindings load libsimgrid.so from site-packages: name that folder.
lib=$(python - <<'PY'
import pathlib, site, sysconfig
roots = {sysconfig.get_paths()["platlib"], sysconfig.get_paths()["purelib"], *site.getsitepackages()}
found = sorted(p for r in roots for p in pathlib.Path(r).glob("libsimgrid.so*"))
print(found[0].parent if found else "")
PY
)
if [ -z "$lib" ]; then
    echo "libsimgrid.so not found in site-packages: look for it with find / -name 'libsimgrid.so*'" >&2
    exit 1
fi
echo "SimGrid installed. Before running bench/simgrid_check.py:"
echo "export LD_LIBRARY_PATH=$lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
