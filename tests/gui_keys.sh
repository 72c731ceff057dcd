#!/bin/bash
# The real-window test: the GUI on the built-in demo under a virtual X server, driven with real key
# presses (xdotool): step with F10 / F11 / Shift+F11, open each panel (Ctrl+1..0) and save a
# screenshot of each (F12). Checks the app's own state log, that every screenshot is non-blank and
# that they differ from each other. Then prints the UI's CPU time per frame with every panel open.
# usage: gui_keys.sh LAYERSCOPE_BINARY OUT_DIR [FIXTURES_DIR]
set -u
binary=$1 out=$2 fixtures=${3:-}
command -v xdotool >/dev/null || { echo "SKIP: xdotool not installed"; exit 77; }
rm -rf "$out" && mkdir -p "$out"
export XDG_CACHE_HOME="$out/cache" XDG_CONFIG_HOME="$out/config"

inner() {
    local log="$out/state.log"
    "$binary" --state-log "$log" --screenshot-dir "$out" >"$out/app.out" 2>&1 &
    local pid=$!
    local win
    win=$(timeout 30 xdotool search --sync --name '^Layerscope$' | head -n 1)
    [ -n "$win" ] || { echo "FAIL: no Layerscope window"; kill $pid; return 1; }
    sleep 1
    xdotool windowfocus --sync "$win" 2>/dev/null || true
    # GLFW under a bare X server takes keys only after a click: one on the attention panel's
    # empty area (it selects nothing).
    xdotool mousemove --window "$win" 600 400 click 1
    sleep 0.5
    wait_for() {  # wait_for PATTERN: until the state log has a line matching it
        for _ in $(seq 1 200); do grep -q -- "$1" "$log" 2>/dev/null && return 0; sleep 0.1; done
        echo "FAIL: the state log never showed: $1"; cat "$log"; return 1
    }
    press() { xdotool key "$1"; sleep 0.4; }
    # The demo stops at its first divergence, Qcur-0#3 (event 5).
    wait_for "state paused cursor 5 Qcur-0#3" || return 1
    press F10;       wait_for "state paused cursor 6 Vcur-0" || return 1
    press F11;       wait_for "key F11 step layer" || return 1
    wait_for "state paused cursor [0-9]* norm-1 " || return 1
    press shift+F11; wait_for "key Shift+F11 step token" || return 1
    local shots=0
    for k in 1 2 3 4 5 6 7 8 9 0; do
        press ctrl+$k
        press F12
        shots=$((shots + 1))
        wait_for "screenshot .*layerscope-$(printf %03d $shots).png" || return 1
    done
    press ctrl+q
    for _ in $(seq 1 50); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
    kill $pid 2>/dev/null
    return 0
}
export -f inner 2>/dev/null
export binary out
xvfb-run -a -s "-screen 0 1280x800x24" bash -c "$(declare -f inner); inner" || exit 1

log="$out/state.log"
# The doctor works on its own thread and logs its verdict once.
for want in "key F10 step op" "key F11 step layer" "key Shift+F11 step token" "panel events on" "panel attention on" \
            "panel divergence on" "panel logits on" "doctor Qcur-0#3 matches the reference if RoPE"; do
    grep -q "$want" "$log" || { echo "FAIL: state log lacks \"$want\""; exit 1; }
done
n=$(ls "$out"/layerscope-*.png 2>/dev/null | wc -l)
[ "$n" -eq 10 ] || { echo "FAIL: $n screenshots, expected 10"; exit 1; }
prev=""
for f in "$out"/layerscope-*.png; do
    stddev=$(convert "$f" -colorspace Gray -format "%[fx:standard_deviation]" info:)
    awk -v s="$stddev" 'BEGIN { exit !(s > 0.05) }' || { echo "FAIL: $f looks blank (grey stddev $stddev)"; exit 1; }
    if [ -n "$prev" ]; then
        diff=$(compare -metric AE "$prev" "$f" null: 2>&1 | cut -d' ' -f1)
        [ "${diff%.*}" -gt 100 ] 2>/dev/null || { echo "FAIL: $f is the same as $prev ($diff pixels differ)"; exit 1; }
    fi
    echo "screenshot $(basename "$f"): grey stddev $stddev${prev:+, $diff pixels differ from the previous}"
    prev=$f
done

# UI CPU time per frame at 1280x800 with every panel open (figures, not a pass/fail check).
xvfb-run -a -s "-screen 0 1280x800x24" "$binary" --all-panels --measure-frames 120 | sed 's/^/demo: /'
if [ -n "$fixtures" ] && [ -f "$fixtures/models/llama-gqa-mini-F16.gguf" ]; then
    xvfb-run -a -s "-screen 0 1280x800x24" "$binary" "$fixtures/models/llama-gqa-mini-F16.gguf" \
        -r "$fixtures/dumps/llama-gqa-mini-F16_happy_n4_fa-off_nocache.gguf" --all-panels --measure-frames 120 |
        sed 's/^/llama-gqa-mini-F16: /'
fi
echo "PASS"
