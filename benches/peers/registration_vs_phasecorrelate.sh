#!/usr/bin/env bash
# tessera's registration against cv2.phaseCorrelate on hard footage (JSON on stdout), in
# the OpenCV anchor's cached virtual environment. Build first: cargo build --release.
set -euo pipefail
venv="${TESSERA_ANCHOR_VENV:-$HOME/.cache/tessera-anchor-venv}"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import cv2, numpy' 2>/dev/null; then
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q opencv-python-headless numpy >&2
fi
exec "$venv/bin/python" "$(dirname "$0")/registration_vs_phasecorrelate.py" "$@"
