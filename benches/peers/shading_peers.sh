#!/usr/bin/env bash
# Shading correction: tessera's flat-field estimate beside BaSiC (basicpy) on vignetted
# tile grids (see shading_peers.py). Makes or reuses the virtual environment
# target/shading-venv (TESSERA_SHADING_VENV to put it elsewhere) with BaSiC and its JAX
# pinned (BaSiC 1.2 needs NumPy 1.x, so not the peers' environment), then runs the script;
# its arguments pass through (--tessera PATH, --only NAME..., --json PATH).
# Build tessera first: cargo build --release.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="${TESSERA_SHADING_VENV:-$root/target/shading-venv}"
# basicpy 1.2.0 imports hyperactive's and gradient-free-optimizers' older APIs.
pins=(basicpy==1.2.0 hyperactive==4.8.0 gradient-free-optimizers==1.5.0 jax==0.4.23 jaxlib==0.4.23
      numpy==1.26.4 scipy==1.12.0 scikit-image==0.26.0 tifffile==2026.3.3 pillow==13.0.0)
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import basicpy, tifffile, PIL, scipy' 2>/dev/null; then
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q --only-binary=:all: "${pins[@]}" >&2
fi
exec "$venv/bin/python" "$root/benches/peers/shading_peers.py" "$@"
