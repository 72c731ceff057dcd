#!/bin/sh
# The GUI's capture budget: --capture-budget 1M on stories260K, a prompt set by the script and run
# to the end keeps the full values of captured events within 1 MiB (the older ones dropped, their
# statistics kept), and the state log says so with the numbers.
# usage: gui_capture_budget.sh LAYERSCOPE_BINARY FIXTURES_DIR
set -eu
binary=$1 fixtures=$2
model="$fixtures/models/stories260K.gguf"
[ -f "$model" ] || { echo "SKIP: stories260K not found (it lives in ../shared/fixtures)"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/layerscope-gui-budget.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cat > "$dir/script" <<END
wait
prompt Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends.
wait
key F5
wait
quit
END
xvfb-run -a -s "-screen 0 1280x800x24" "$binary" "$model" --backend cpu --capture-budget 1M --script "$dir/script" \
    --state-log "$dir/log"
line=$(grep "^captures " "$dir/log" | tail -n 1)
echo "$line"
grep -q "^script prompt Once upon a time" "$dir/log" || { echo "FAIL: the script's prompt was not taken"; exit 1; }
bytes=$(echo "$line" | sed -n 's/^captures [0-9]* tensors \([0-9]*\) bytes budget \([0-9]*\) evicted \([0-9]*\)$/\1/p')
budget=$(echo "$line" | sed -n 's/^captures [0-9]* tensors \([0-9]*\) bytes budget \([0-9]*\) evicted \([0-9]*\)$/\2/p')
evicted=$(echo "$line" | sed -n 's/^captures [0-9]* tensors \([0-9]*\) bytes budget \([0-9]*\) evicted \([0-9]*\)$/\3/p')
[ "$budget" = 1048576 ] || { echo "FAIL: the budget is '$budget', not --capture-budget's 1048576"; exit 1; }
[ -n "$bytes" ] && [ "$bytes" -le "$budget" ] || { echo "FAIL: $bytes bytes kept over the budget"; exit 1; }
[ "$evicted" -gt 0 ] || { echo "FAIL: a run of this prompt should outgrow 1 MiB (nothing was dropped)"; exit 1; }
grep -q "^state finished " "$dir/log" || { echo "FAIL: the run did not finish"; exit 1; }
echo "PASS: $bytes bytes kept within the 1 MiB budget, $evicted tensors' values dropped"
