#!/bin/sh
# The Quantization panel through the app: File > Open the demo: what does Q4_K cost? (script
# "demo quant") runs the demo model's Q4_K file against its F16 file's run; and a model opened with
# --against-model whose one tensor is damaged (Q2_K among Q8_0) ranks that tensor first.
# usage: gui_quant.sh LAYERSCOPE_BINARY
set -eu
binary=$1
dir=$(mktemp -d "${TMPDIR:-/tmp}/layerscope-gui-quant.XXXXXX")
trap 'rm -rf "$dir"' EXIT
export XDG_CACHE_HOME="$dir/cache"
cat > "$dir/demo" <<END
wait
demo quant
wait
frames 3
screenshot $dir/demo.png
quit
END
xvfb-run -a -s "-screen 0 1280x800x24" "$binary" --script "$dir/demo" --state-log "$dir/demo.log"
cat "$dir/demo.log"
grep -q "^ok demo opened: the demo model in Q4_K, its F16 file's run the reference$" "$dir/demo.log" ||
    { echo "FAIL: the Q4_K demo did not open"; exit 1; }
grep -Eq "^quant: [0-9]+ weights with a local error, the worst blk\.[0-9]+\.[a-z_]+\.weight \([0-9.e-]+\); output KL mean [0-9.e-]+ over 19 positions" "$dir/demo.log" ||
    { echo "FAIL: the Quantization panel did not rank the demo's weights"; exit 1; }
test -s "$dir/demo.png" || { echo "FAIL: no screenshot of the demo"; exit 1; }

shape="--embd 256 --layers 2 --heads 4 --kv-heads 2 --ff 512 --vocab 400 --seed 7"
"$binary" make-model "$dir/m.gguf" $shape --type f16 > /dev/null
"$binary" make-model "$dir/damaged.gguf" $shape --type q8_0 --tensor-type blk.1.ffn_down.weight=q2_K > /dev/null
cat > "$dir/pair" <<END
wait
key F5
wait
frames 3
quit
END
xvfb-run -a -s "-screen 0 1280x800x24" "$binary" "$dir/damaged.gguf" --against-model "$dir/m.gguf" --backend cpu \
    --script "$dir/pair" --state-log "$dir/pair.log"
cat "$dir/pair.log"
grep -Eq "^quant: 16 weights with a local error, the worst blk\.1\.ffn_down\.weight " "$dir/pair.log" ||
    { echo "FAIL: the damaged tensor is not ranked first"; exit 1; }
echo "PASS: the demo's weights ranked; the damaged tensor first"
