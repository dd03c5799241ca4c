#!/usr/bin/env bash
# Tile grids: tessera's `stitch --grid` beside ASHLAR and m2stitch on the same generated grids
# (see grid_peers.py). Makes or reuses the virtual environment target/peers-venv
# (TESSERA_PEERS_VENV to put it elsewhere) with the peers pinned, then runs the script; its
# arguments pass through (--tessera PATH, --repeat N, --only NAME..., --json PATH).
# Build tessera first: cargo build --release. ASHLAR's Python API starts a JVM (pyjnius):
# a Java runtime (17 here) must be installed.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="${TESSERA_PEERS_VENV:-$root/target/peers-venv}"
# ASHLAR is published only as a source archive (pure Python, the BioFormats jar inside; it
# builds without a download); everything else installs as binary wheels.
pins=(ashlar==1.20.0 m2stitch==0.7.2 numpy==2.4.6 scipy==1.17.1 scikit-image==0.26.0
      scikit-learn==1.9.1 pandas==2.3.3 networkx==3.6.1 tifffile==2026.3.3 pillow==13.0.0
      pyjnius==1.9.0 zarr==3.1.6 matplotlib==3.11.2)
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import ashlar, m2stitch, tifffile, PIL' 2>/dev/null \
   || [ "$("$venv/bin/python" -c 'import ashlar; print(ashlar.__version__)' 2>/dev/null)" != "1.20.0" ]; then
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q --only-binary=:all: --no-binary=ashlar "${pins[@]}" >&2
fi
exec "$venv/bin/python" "$root/benches/peers/grid_peers.py" "$@"
