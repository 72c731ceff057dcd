#!/bin/sh
# GUI smoke test: opens the GUI on a model under a virtual X server, saves a screenshot after a few
# frames and checks that it is a 1280x800 PNG with real content (not a blank or single-colour frame),
# then that a second run does not replace it (exit 2).
# usage: gui_smoke.sh LAYERSCOPE_BINARY MODEL.gguf OUT.png
set -eu
binary=$1 model=$2 out=$3
[ -f "$model" ] || { echo "SKIP: $model not found (the fixtures live in ../shared/fixtures)"; exit 77; }
rm -f "$out"
xvfb-run -a -s "-screen 0 1280x800x24" "$binary" "$model" --screenshot "$out" --frames 5
test -s "$out" || { echo "FAIL: no screenshot written to $out"; exit 1; }
size=$(identify -format "%wx%h" "$out")
[ "$size" = "1280x800" ] || { echo "FAIL: screenshot is $size, expected 1280x800"; exit 1; }
# Standard deviation of the grey levels (0..1): a blank frame is 0; the UI with text and tables
# is well above 0.05.
stddev=$(convert "$out" -colorspace Gray -format "%[fx:standard_deviation]" info:)
colors=$(identify -format "%k" "$out")
echo "screenshot $out: $size, grey stddev $stddev, $colors colours"
awk -v s="$stddev" 'BEGIN { exit !(s > 0.05) }' || { echo "FAIL: screenshot looks blank (stddev $stddev)"; exit 1; }
[ "$colors" -gt 50 ] || { echo "FAIL: only $colors colours; the UI did not render"; exit 1; }
before=$(cksum < "$out")
code=0
# Refused before any window opens, so no display is needed.
env -u DISPLAY "$binary" "$model" --screenshot "$out" --frames 1 || code=$?
[ "$code" -eq 2 ] || { echo "FAIL: a screenshot over an existing file exited $code, expected 2"; exit 1; }
[ "$(cksum < "$out")" = "$before" ] || { echo "FAIL: the existing screenshot was replaced"; exit 1; }
echo "PASS"
