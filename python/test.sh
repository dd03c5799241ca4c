#!/usr/bin/env bash
# Builds the Python package (maturin, release, into the repository's target/, where the GPU
# payload build, scripts/gpu-check, makes the same wheel first), installs the wheel into the
# test environment (python/setup-venv) and runs pytest against the CLI at
# target/release/tessera. Ends with pytest's summary line. Called by scripts/test; runs on
# its own too.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(bash python/setup-venv)
export CARGO_TARGET_DIR=$PWD/target
rm -f target/wheels/tessera-*.whl
"$venv/bin/maturin" build --release --quiet -m python/Cargo.toml -o target/wheels >&2
"$venv/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps target/wheels/tessera-*.whl
# Then with its extras, as python/README.md installs it: pip checks that `[dask]` and
# `[distributed]` resolve (to the pinned packages already in the environment).
wheel=$(ls target/wheels/tessera-*.whl)
"$venv/bin/pip" install --quiet --disable-pip-version-check "$wheel[dask,distributed]"
# The CLI the tests compare against (already built by `cargo test --workspace` in scripts/test).
[ -x target/release/tessera ] || cargo build --release --quiet --bin tessera
TESSERA_BIN=$PWD/target/release/tessera "$venv/bin/pytest" -q -p no:cacheprovider python/tests "$@"
