#!/bin/sh
# The MoE router panel on deepseek2 through its script actions: the F16 fixture run against
# llama.cpp's dump of the same prompt lists, for layer 1 (the first MoE block) and token 0, the
# same two experts as the reference, and no choice in the run differs from it.
# usage: gui_router.sh LAYERSCOPE_BINARY FIXTURES_DIR
set -eu
binary=$1 fixtures=$2
model="$fixtures/models/deepseek2-mini-F16.gguf"
dump="$fixtures/dumps/deepseek2-mini-F16_rome_n0_fa-off_nocache.gguf"
[ -f "$model" ] && [ -f "$dump" ] || { echo "SKIP: deepseek2 fixtures not found (they live in ../shared/fixtures)"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/layerscope-gui-router.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cat > "$dir/script" <<END
wait
key F5
wait
panel router on
select ffn_moe_gate-1
frames 3
screenshot $dir/router.png
log router shown
quit
END
xvfb-run -a -s "-screen 0 1280x800x24" "$binary" "$model" -r "$dump" --backend cpu --script "$dir/script" \
    --state-log "$dir/log"
cat "$dir/log"
grep -q "^state finished cursor [0-9]* .* first_divergent -1$" "$dir/log" ||
    { echo "FAIL: the run did not finish clean against the reference"; exit 1; }
grep -q "^router decode 0: [0-9]* MoE layers x [0-9]* tokens, 2 of 8 experts, 0 differ from the reference$" "$dir/log" ||
    { echo "FAIL: the router panel did not list the run's MoE layers, or a choice differs"; exit 1; }
line=$(grep "^router layer 1 token 0: " "$dir/log" | head -n 1)
[ -n "$line" ] || { echo "FAIL: no router row for layer 1, token 0"; exit 1; }
ours=$(echo "$line" | sed -n 's/.* ours \([0-9]*,[0-9]*\) reference .*/\1/p')
ref=$(echo "$line" | sed -n 's/.* reference \([0-9]*,[0-9]*\) gap .*/\1/p')
[ -n "$ours" ] && [ "$ours" = "$ref" ] ||
    { echo "FAIL: layer 1 token 0: ours '$ours', the reference's '$ref'"; exit 1; }
test -s "$dir/router.png" || { echo "FAIL: no screenshot of the router panel"; exit 1; }
echo "PASS: layer 1 token 0 chose experts $ours, as the reference did"
