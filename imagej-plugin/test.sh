#!/usr/bin/env bash
# Builds the Rust library, Tessera_.jar and the JUnit 4 tests, then runs the tests in a
# headless JVM against the real ImageJ (Debian's libij-java). Called by .ci/run.
# Installs what is missing (a JDK, libij-java, junit4) with apt-get.
#
#   imagej-plugin/test.sh              release build of the native library
#   PROFILE=dev imagej-plugin/test.sh  debug build (faster to compile)
#   TESSERA_DATA=/path/to/shared/data  the shared test data (default: ../shared/data
#                                      beside the repository)
#   TESSERA_CLI=path/tessera           the CLI the tests compare with, already built
#   TESSERA_JNI_LIB=path/libtessera_jni.so  the native library, already built
#                                      (scripts/test passes both from its workspace build)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
IJ_JAR="${IJ_JAR:-/usr/share/java/ij.jar}"

need_apt=()
command -v javac >/dev/null || need_apt+=(default-jdk-headless)
[ -f "$IJ_JAR" ] || need_apt+=(libij-java)
[ -f /usr/share/java/junit4.jar ] || need_apt+=(junit4)
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "test.sh: installing ${need_apt[*]}" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >&2
fi

"$here/build.sh"

data="${TESSERA_DATA:-$root/../shared/data}"
[ -d "$data" ] || { echo "test.sh: test data not found at $data (set TESSERA_DATA)" >&2; exit 1; }
data="$(cd "$data" && pwd)"

# The Rust CLI, for the tests that compare the plugin's output with it.
cli_args=()
profile="${PROFILE:-release}"
if [ -n "${TESSERA_CLI:-}" ]; then
    cli_args=(-Dtessera.cli="$TESSERA_CLI")
elif grep -q '^name = "tessera-cli"' "$root/cli/Cargo.toml" 2>/dev/null && [ -f "$root/cli/src/main.rs" ]; then
    (cd "$root" && if [ "$profile" = release ]; then cargo build --release -p tessera-cli --bin tessera; else cargo build --profile "$profile" -p tessera-cli --bin tessera; fi)
    [ "$profile" = dev ] && pdir=debug || pdir="$profile"
    target_dir="$(cd "$root" && cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
    cli_args=(-Dtessera.cli="$target_dir/$pdir/tessera")
fi

out="$here/build/test-classes"
rm -rf "$out"
mkdir -p "$out"
cp_compile="$IJ_JAR:$here/build/Tessera_.jar:/usr/share/java/junit4.jar:/usr/share/java/hamcrest-core.jar:/usr/share/java/hamcrest-library.jar"
javac --release 11 -encoding UTF-8 -cp "$cp_compile" -d "$out" $(find "$here/test" -name '*.java' | sort)
classes=$(cd "$here/test" && find . -name '*Test.java' | sed 's|^\./||; s|\.java$||; s|/|.|g' | sort)

log="$here/build/junit.log"
set +e
java -Djava.awt.headless=true -Xcheck:jni -Dtessera.data="$data" -Dtessera.assets="$root/assets" "${cli_args[@]}" \
    -cp "$cp_compile:$out" org.junit.runner.JUnitCore $classes 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
echo "JUnit summary: $(grep -E '^(OK \(|Tests run:)' "$log" | tail -1)"
exit $rc
