#!/bin/sh
# The Backends panel's A/B in the GUI, through its script actions: the model's run on cuda-emulated
# as the reference agrees with the session's run on every event; with a RoPE fault injected into
# the session, the first divergent event is the roped Q (event 5 of stories260K).
# usage: gui_backends.sh LAYERSCOPE_BINARY FIXTURES_DIR
set -eu
binary=$1 fixtures=$2
model="$fixtures/models/stories260K.gguf"
[ -f "$model" ] || { echo "SKIP: $model not found (the fixtures live in ../shared/fixtures)"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/layerscope-gui-backends.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cat > "$dir/script" <<'END'
wait
against cuda-emulated
wait
key F5
wait
log clean run compared
fault rope-pairing
wait
key F5
wait
panel backends on
frames 2
quit
END
xvfb-run -a -s "-screen 0 1280x800x24" "$binary" "$model" --script "$dir/script" --state-log "$dir/log"
cat "$dir/log"
# The clean session agrees with the cuda-emulated run to the end; the faulty one diverges at event 5.
clean=$(sed -n '/^ok compared against the cuda-emulated backend/,/^note clean run compared/p' "$dir/log")
echo "$clean" | grep -q "^state finished cursor [0-9]* result_output first_divergent -1$" ||
    { echo "FAIL: the clean run did not agree with the cuda-emulated run on every event"; exit 1; }
sed -n '/^ok fault rope-pairing/,$p' "$dir/log" | grep -q "^state finished cursor [0-9]* result_output first_divergent 5$" ||
    { echo "FAIL: the RoPE fault did not diverge at event 5 against the cuda-emulated run"; exit 1; }
echo "PASS"
