#!/bin/bash
# The workspace under a virtual X server with real keys and mouse (xdotool), on a 22-layer, 32-head
# model with every panel open, at 1280x800 and 2560x1440: after every layout change the app's state
# log lists each shown panel's rectangle, and no two overlap and each has its minimum size. Drags a
# splitter, clicks a tab, drags a tab to another pane's edge, switches the named layouts (Alt+1..5,
# a screenshot of each), quits, and checks that the next start comes back to the same layout (the
# settings file). Also starts the built-in demo twice on one cache folder.
# usage: gui_workspace.sh LAYERSCOPE_BINARY OUT_DIR
set -u
binary=$1 out=$2
command -v xdotool >/dev/null || { echo "SKIP: xdotool not installed"; exit 77; }
rm -rf "$out" && mkdir -p "$out"
export XDG_CACHE_HOME="$out/cache" XDG_CONFIG_HOME="$out/config"
fail() { echo "FAIL: $*"; exit 1; }

# The demo, twice on the same cache folder: the second start remakes the demo's files.
for i in 1 2; do
    xvfb-run -a -s "-screen 0 1280x800x24" "$binary" --screenshot "$out/demo-$i.png" --frames 2 >"$out/demo-$i.out" 2>&1 ||
        fail "the demo's start $i exited $?: $(cat "$out/demo-$i.out")"
done

# A TinyLlama-shaped model (22 layers, 32 heads) small enough for CI, and its own reference dump.
model="$out/ws.gguf" ref="$out/ws-ref.gguf"
"$binary" make-model "$model" --layers 22 --heads 32 --kv-heads 4 --embd 256 --ff 512 --vocab 400 --seed 3 >/dev/null ||
    fail "make-model"
"$binary" run -m "$model" -p "Once upon a time, a girl" -n 0 --dump "$ref" >/dev/null || fail "run --dump"

# check_log LOG MIN_W MIN_H: every "layout ... panels" block of the state log tiles without overlap
# and with each panel at least MIN_W x MIN_H; prints how many blocks it checked.
check_log() {
    awk -v minw="$2" -v minh="$3" '
        function check(   i, j) {
            for (i = 1; i <= n; i++) {
                if (w[i] < minw || h[i] < minh) { printf "block %d: %s is %dx%d, below %dx%d\n", blocks, nm[i], w[i], h[i], minw, minh; bad = 1 }
                for (j = i + 1; j <= n; j++)
                    if (x[i] < x[j] + w[j] && x[j] < x[i] + w[i] && y[i] < y[j] + h[j] && y[j] < y[i] + h[i]) {
                        printf "block %d: %s and %s overlap\n", blocks, nm[i], nm[j]; bad = 1
                    }
            }
            n = 0
        }
        /^layout .* panels$/ { if (n) check(); blocks++; next }
        /^panel [a-z]+ -?[0-9]+ -?[0-9]+ [0-9]+ [0-9]+$/ { n++; nm[n] = $2; x[n] = $3; y[n] = $4; w[n] = $5; h[n] = $6 }
        END { if (n) check(); if (bad) exit 1; print blocks }' "$1"
}

session() {  # session W H: one run of the app at that size, driven by real input
    local W=$1 H=$2 log="$out/state-$1x$2.log"
    "$binary" "$model" -r "$ref" --all-panels --window-size "${W}x${H}" --state-log "$log" --screenshot-dir "$out/$W" \
        >"$out/app-$W.out" 2>&1 &
    local pid=$!
    mkdir -p "$out/$W"
    local win
    win=$(timeout 30 xdotool search --sync --name '^Layerscope$' | head -n 1)
    [ -n "$win" ] || { echo "FAIL: no Layerscope window"; kill $pid; return 1; }
    sleep 1
    xdotool windowfocus --sync "$win" 2>/dev/null || true
    wait_for() {
        for _ in $(seq 1 300); do grep -q -- "$1" "$log" 2>/dev/null && return 0; sleep 0.1; done
        echo "FAIL: the state log never showed: $1"; tail -30 "$log"; return 1
    }
    wait_for "^ok opened" || return 1
    # GLFW under a bare X server takes keys only after a click: one on the status bar.
    xdotool mousemove --window "$win" 5 $((H - 5)) click 1
    sleep 0.5
    # Run the prompt to its end (F5), so that every panel has something to show.
    xdotool key F5
    wait_for "^state finished" || return 1
    # Drag the first vertical splitter 150 pixels to the right.
    local bar
    bar=$(grep '^splitter [0-9]* columns' "$log" | tail -n 1)
    local id sx sy sw sh
    read -r _ id _ sx sy sw sh <<<"$bar"
    local cx=$((sx + sw / 2)) cy=$((sy + sh / 2))
    xdotool mousemove --window "$win" $cx $cy mousedown 1
    for step in 30 60 90 120 150; do sleep 0.1; xdotool mousemove --window "$win" $((cx + step)) $cy; done
    sleep 0.2
    xdotool mouseup 1
    wait_for "splitter $id share" || return 1
    # Drag the shown tab of the top-right pane to the bottom edge of the left column's lower pane.
    local tr
    tr=$(awk '/^layout .* panels$/ { delete r; n = 0 } /^panel [a-z]+ [0-9]+ [0-9]+ [0-9]+ [0-9]+$/ { n++; r[n] = $0 } END { best = ""; bx = -1; for (i = 1; i <= n; i++) { split(r[i], f, " "); if (f[4] < 40 && f[3] > bx) { bx = f[3]; best = r[i] } } print best }' "$log")
    local tname tx ty tw th
    read -r _ tname tx ty tw th <<<"$tr"
    local ev
    ev=$(awk '/^layout .* panels$/ { delete r; n = 0 } /^panel [a-z]+ [0-9]+ [0-9]+ [0-9]+ [0-9]+$/ { n++; r[n] = $0 } END { for (i = 1; i <= n; i++) { split(r[i], f, " "); if (f[3] == 0 && f[4] > 100) print r[i] } }' "$log" | tail -n 1)
    local ename ex ey ew eh
    read -r _ ename ex ey ew eh <<<"$ev"
    xdotool mousemove --window "$win" $((tx + 30)) $((ty + 12)) mousedown 1
    local gx=$((ex + ew / 2)) gy=$((ey + eh - 20))
    for f in 1 2 3 4 5 6 7 8; do
        sleep 0.1
        xdotool mousemove --window "$win" $((tx + 30 + (gx - tx - 30) * f / 8)) $((ty + 12 + (gy - ty - 12) * f / 8))
    done
    sleep 0.3
    xdotool mouseup 1
    wait_for "^move $tname below pane" || return 1
    sleep 0.5
    # The named layouts, one key each, a screenshot of each (F12).
    local k
    for k in 2 3 4 5 1; do
        xdotool key alt+$k
        sleep 0.6
        xdotool key F12
        sleep 0.6
    done
    wait_for "^layout default$" || return 1
    # Back to a layout of our own for the restart: one more splitter drag, then quit.
    bar=$(grep '^splitter [0-9]* rows' "$log" | tail -n 1)
    read -r _ id _ sx sy sw sh <<<"$bar"
    cx=$((sx + sw / 2)) cy=$((sy + sh / 2))
    xdotool mousemove --window "$win" $cx $cy mousedown 1
    for step in 20 40 60; do sleep 0.1; xdotool mousemove --window "$win" $cx $((cy + step)); done
    sleep 0.2
    xdotool mouseup 1
    wait_for "splitter $id share" || return 1
    sleep 0.5
    xdotool key ctrl+q
    for _ in $(seq 1 50); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
    kill $pid 2>/dev/null
    return 0
}
export -f session check_log 2>/dev/null
export binary out model ref
for size in "1280 800" "2560 1440"; do
    set -- $size
    xvfb-run -a -s "-screen 0 ${1}x${2}x24" bash -c "$(declare -f session); session $1 $2" || fail "the session at ${1}x${2}"
    log="$out/state-${1}x${2}.log"
    blocks=$(check_log "$log" 240 160) || fail "at ${1}x${2}: $(check_log "$log" 240 160 | head -5)"
    [ "$blocks" -ge 8 ] || fail "at ${1}x${2}: only $blocks layouts were logged"
    n=$(ls "$out/$1"/layerscope-*.png 2>/dev/null | wc -l)
    [ "$n" -eq 5 ] || fail "at ${1}x${2}: $n screenshots of the layouts, expected 5"
    echo "${1}x${2}: $blocks layouts checked (no overlap, each panel at least 240x160), $n layout screenshots"
done

# HiDPI: twice the fonts and sizes (--ui-scale 2, as a monitor's content scale of 2 gives), and the
# panes' minimum doubled with them.
xvfb-run -a -s "-screen 0 2560x1440x24" "$binary" "$model" -r "$ref" --all-panels --window-size 2560x1440 --ui-scale 2 \
    --state-log "$out/hidpi.log" --screenshot "$out/hidpi.png" --frames 3 >"$out/hidpi.out" 2>&1 || fail "the HiDPI run: $(cat "$out/hidpi.out")"
blocks=$(check_log "$out/hidpi.log" 480 320) || fail "at scale 2: $(check_log "$out/hidpi.log" 480 320 | head -5)"
echo "scale 2 at 2560x1440: $blocks layout(s) checked (no overlap, each panel at least 480x320)"

# The next start comes back as the last one left: the same panels in the same rectangles.
last_block() { awk '/^layout .* panels$/ { b = "" } /^panel [a-z]+ -?[0-9]+ -?[0-9]+ [0-9]+ [0-9]+$/ { b = b $0 "\n" } END { printf "%s", b }' "$1"; }
before=$(last_block "$out/state-2560x1440.log")
restart() {
    "$binary" "$model" -r "$ref" --window-size 2560x1440 --state-log "$out/restart.log" >"$out/restart.out" 2>&1 &
    local pid=$!
    for _ in $(seq 1 300); do grep -q '^layout .* panels$' "$out/restart.log" 2>/dev/null && break; sleep 0.1; done
    sleep 0.5
    kill $pid 2>/dev/null
    wait $pid 2>/dev/null
    return 0
}
export -f restart 2>/dev/null
xvfb-run -a -s "-screen 0 2560x1440x24" bash -c "$(declare -f restart); restart"
after=$(awk '/^layout .* panels$/ { if (seen++) exit } /^panel [a-z]+ -?[0-9]+ -?[0-9]+ [0-9]+ [0-9]+$/ { print }' "$out/restart.log")
[ "$before" = "$after" ] || fail "the restart did not come back to the saved layout:
before:
$before
after:
$after"
grep -q '"layout"' "$out/config/layerscope/settings.json" || fail "no layout in the settings file"
echo "restart: the saved layout came back ($(echo "$after" | wc -l) panels)"

# A script's open while the demo still loads waits for it (queued), then opens.
printf 'open %s\nwait\nquit\n' "$model" >"$out/queue.script"
xvfb-run -a -s "-screen 0 1280x800x24" "$binary" --script "$out/queue.script" --state-log "$out/queue.log" >"$out/queue.out" 2>&1 ||
    fail "the queued open: $(cat "$out/queue.out")"
grep -q "^queued opened $model (after demo opened" "$out/queue.log" || fail "the open was not queued behind the demo: $(cat "$out/queue.log")"
grep -q "^ok opened $model$" "$out/queue.log" || fail "the queued open did not open the model"
echo "queue: the script's open waited for the demo, then opened the model"

# Tensor history: an element followed through the run; a click on one of its rows moves the cursor.
cat >"$out/history.script" <<END
key F5
wait
history element 0 2 5
frames 5
END
hist() {
    local log="$out/history.log"
    "$binary" "$model" -r "$ref" --script "$out/history.script" --keep-open --state-log "$log" >"$out/history.out" 2>&1 &
    local pid=$!
    local win
    win=$(timeout 30 xdotool search --sync --name '^Layerscope$' | head -n 1)
    [ -n "$win" ] || { echo "FAIL: no Layerscope window"; kill $pid; return 1; }
    for _ in $(seq 1 300); do grep -q '^history element' "$log" 2>/dev/null && break; sleep 0.1; done
    sleep 1
    local line px py pw ph
    line=$(grep '^panel history ' "$log" | tail -n 1)
    read -r _ _ px py pw ph <<<"$line"
    [ -n "$py" ] || { echo "FAIL: the history panel is not shown"; kill $pid; return 1; }
    # Its rows start below the mode, the fields, a line of text and the table's header.
    local y
    for y in $(seq 100 10 220); do
        xdotool mousemove --window "$win" $((px + 20)) $((py + y)) click 1
        sleep 0.3
        grep -q '^history select' "$log" && break
    done
    sleep 0.3
    kill $pid 2>/dev/null
    wait $pid 2>/dev/null
    return 0
}
export -f hist 2>/dev/null
xvfb-run -a -s "-screen 0 1280x800x24" bash -c "$(declare -f hist); hist" || fail "the history session"
grep -Eq '^history element decode 0 token 2 channel 5: [0-9]+ events$' "$out/history.log" || fail "no history in the state log"
sel=$(grep '^history select' "$out/history.log" | head -n 1)
[ -n "$sel" ] || fail "a click on a history row selected nothing"
read -r _ _ index name <<<"$sel"
grep -q "^select $index $name$" "$out/history.log" || fail "the history row's click did not move the cursor to $index $name"
echo "history: $(grep '^history element' "$out/history.log"); a click moved the cursor to $name"

# UI CPU time per frame with every panel open on this model (figures, not a pass/fail check).
# The prompt run to its end first (the script), so that every panel draws its data.
printf 'key F5\nwait\n' >"$out/run.script"
for size in "1280 800" "2560 1440"; do
    set -- $size
    xvfb-run -a -s "-screen 0 ${1}x${2}x24" "$binary" "$model" -r "$ref" --all-panels --window-size "${1}x${2}" \
        --script "$out/run.script" --measure-frames 120 2>/dev/null | sed 's/^/22 layers x 32 heads, run to the end: /'
done
echo "PASS"
