#!/usr/bin/env bash
# Builds imagej-plugin/build/Tessera_.jar: the plugin classes, plugins.config and the Rust
# library libtessera_jni.so (linux-x86_64) inside. Installing = copying the jar into
# ImageJ's or Fiji's plugins/ folder.
#
#   imagej-plugin/build.sh            release build of the native library (what ships)
#   PROFILE=dev imagej-plugin/build.sh   faster to compile, slow to run
#   TESSERA_JNI_LIB=path/libtessera_jni.so imagej-plugin/build.sh
#                                        packs a library already built (scripts/test
#                                        passes the one its workspace build made)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
profile="${PROFILE:-release}"
IJ_JAR="${IJ_JAR:-/usr/share/java/ij.jar}"

need_apt=()
command -v javac >/dev/null || need_apt+=(default-jdk-headless)
[ -f "$IJ_JAR" ] || need_apt+=(libij-java)
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "build.sh: installing ${need_apt[*]}" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >&2
fi

cd "$root"
if [ -n "${TESSERA_JNI_LIB:-}" ]; then
    lib=$TESSERA_JNI_LIB
    profile="given ($lib)"
else
    if [ "$profile" = release ]; then
        cargo build --release -p tessera-jni
    else
        cargo build --profile "$profile" -p tessera-jni
    fi
    target_dir="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
    [ "$profile" = dev ] && profile_dir=debug || profile_dir="$profile"
    lib="$target_dir/$profile_dir/libtessera_jni.so"
fi
[ -f "$lib" ] || { echo "build.sh: $lib was not built" >&2; exit 1; }

out="$here/build"
rm -rf "$out/classes" "$out/jar"
mkdir -p "$out/classes" "$out/jar/native/linux-x86_64"
javac --release 11 -Xlint:all -Xlint:-options -encoding UTF-8 -cp "$IJ_JAR" -d "$out/classes" \
    $(find "$here/src" -name '*.java' | sort)
cp -r "$out/classes/." "$out/jar/"
cp "$here/plugins.config" "$out/jar/"
cp "$lib" "$out/jar/native/linux-x86_64/libtessera_jni.so"
strip --strip-debug "$out/jar/native/linux-x86_64/libtessera_jni.so" 2>/dev/null || true
rm -f "$out/Tessera_.jar"
jar --create --file "$out/Tessera_.jar" -C "$out/jar" .
echo "built $out/Tessera_.jar ($(du -h "$out/Tessera_.jar" | cut -f1), native library: $profile)"
