#!/usr/bin/env bash
# Quick timings of the plugin: JNI call overhead and native vs ImageJ's own filters on a
# 1920x1080 image, in one JVM (test/tessera/ij/JniBench.java). Prints JSON lines.
#   imagej-plugin/bench.sh [cpu|cuda|auto]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
IJ_JAR="${IJ_JAR:-/usr/share/java/ij.jar}"
"$here/build.sh" >&2
out="$here/build/bench-classes"
rm -rf "$out" && mkdir -p "$out"
cp="$IJ_JAR:$here/build/Tessera_.jar:/usr/share/java/junit4.jar:/usr/share/java/hamcrest-core.jar"
javac --release 11 -encoding UTF-8 -cp "$cp" -d "$out" "$here/test/tessera/ij/JniBench.java" "$here/test/tessera/ij/IjHeadless.java"
data="${TESSERA_DATA:-$here/../../shared/data}"
exec java -Djava.awt.headless=true -Dtessera.data="$data" -cp "$cp:$out" tessera.ij.JniBench "${1:-cpu}"
