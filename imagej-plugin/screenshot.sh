#!/usr/bin/env bash
# The real-window check: ImageJ (Debian's libij-java) under Xvfb with Tessera_.jar in its
# plugins folder. Runs a macro (default: demo/panorama.ijm, a sweep cut from a photograph
# and stitched back), then screenshots the result and the Plugins > Tessera menu into docs/.
#   imagej-plugin/screenshot.sh [macro.ijm]
# Needs xvfb, xdotool and imagemagick (installed with apt-get when missing).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
docs="$root/docs"
data="${TESSERA_DATA:-$root/../shared/data}"
data="$(cd "$data" && pwd)"
need=()
command -v Xvfb >/dev/null || need+=(xvfb)
command -v xdotool >/dev/null || need+=(xdotool)
command -v import >/dev/null || need+=(imagemagick)
if [ ${#need[@]} -gt 0 ]; then
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2
fi
[ -f "$here/build/Tessera_.jar" ] || "$here/build.sh"

work="$(mktemp -d)"
mkdir -p "$work/plugins" "$docs"
cp "$here/build/Tessera_.jar" "$work/plugins/"
# The macro (default: demo/panorama.ijm, a sweep cut from a photograph and stitched back);
# DATA in it stands for the shared data folder.
macro="$work/start.ijm"
sed "s|DATA|$data|g; s|DONEFILE|$work/done|g" "${1:-$here/demo/panorama.ijm}" > "$macro"

display=:$((90 + RANDOM % 100))
Xvfb "$display" -screen 0 1280x800x24 >/dev/null 2>&1 &
xvfb=$!
ij=""
cleanup() { [ -n "$ij" ] && kill "$ij" 2>/dev/null; kill "$xvfb" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
export DISPLAY="$display"
sleep 2
(cd "$work" && java -Dplugins.dir="$work" -cp "${IJ_JAR:-/usr/share/java/ij.jar}" ij.ImageJ -macro "$macro" >"$work/ij.log" 2>&1) &
ij=$!
for _ in $(seq 60); do xdotool search --name '^ImageJ$' >/dev/null 2>&1 && break; sleep 0.5; done
# Wait for the macro's end marker (a macro without one: a fixed pause), then let the
# windows paint.
for _ in $(seq 120); do [ -f "$work/done" ] && break; sleep 0.5; done
sleep "${SETTLE:-3}"
import -window root "$work/result-full.png"
convert "$work/result-full.png" -trim +repage "$docs/imagej-result.png"

# Open Plugins > Tessera: the Plugins menu sits 320 px right of the ImageJ window's left
# edge, Tessera is its last entry. (Offsets for ImageJ 1.53 with its default font.)
eval "$(xdotool search --name '^ImageJ$' | head -1 | xargs xdotool getwindowgeometry --shell)"
xdotool mousemove $((X + 320)) $((Y + 12)) click 1
sleep 1
xdotool mousemove $((X + 322)) $((Y + 150)); sleep 0.3
xdotool mousemove $((X + 332)) $((Y + 157)); sleep 0.3
xdotool click 1
sleep 1.5
import -window root "$work/menu-full.png"
convert "$work/menu-full.png" -crop 780x340+$((X - 20))+0 +repage "$docs/imagej-menu.png"
xdotool key Escape || true
echo "wrote $docs/imagej-menu.png and $docs/imagej-result.png"
cat "$work/ij.log" >&2 || true
