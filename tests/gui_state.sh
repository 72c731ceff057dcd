#!/bin/sh
# The recurrent state panel on qwen35 through its script actions: the qwen35-tiny model run against
# llama.cpp's dump of the same prompt finishes clean, and the panel lists its three Gated DeltaNet
# layers with both states each and its one attention layer.
# usage: gui_state.sh LAYERSCOPE_BINARY TEST_DATA_DIR
set -eu
binary=$1 data=$2
dump="$data/hybrid/qwen35-tiny-F16_story_n8_fa-off.gguf"
[ -f "$dump" ] || { echo "SKIP: $dump not found"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/layerscope-gui-state.XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$binary" make-model "$dir/model.gguf" --preset qwen35-tiny > /dev/null
cat > "$dir/script" <<END
wait
key F5
wait
panel state on
select new_state-2
frames 3
screenshot $dir/state.png
log state shown
quit
END
xvfb-run -a -s "-screen 0 1280x800x24" "$binary" "$dir/model.gguf" -r "$dump" --backend cpu --script "$dir/script" \
    --state-log "$dir/log"
cat "$dir/log"
grep -q "^state finished cursor [0-9]* .* first_divergent -1$" "$dir/log" ||
    { echo "FAIL: the run did not finish clean against the reference"; exit 1; }
grep -q "^state at event [0-9]*: 3 recurrent layers (0..2), 1 attention layers, 6 state events$" "$dir/log" ||
    { echo "FAIL: the state panel did not list the DeltaNet layers' conv and delta states"; exit 1; }
test -s "$dir/state.png" || { echo "FAIL: no screenshot of the state panel"; exit 1; }
echo "PASS: 3 DeltaNet layers with both states, 1 attention layer, clean against llama.cpp"
