#!/usr/bin/env bash
# Runs the fuzz targets of a LAYERSCOPE_FUZZ build, SECONDS each (default 60), two at a time, from
# seeds made from the fixtures and the small inputs in tests/fuzz/corpus. Fails when a target finds
# a crash, a sanitizer report, a leak, an input that takes over 10 s or a run over 2 GB; the input
# is left in BUILD_DIR/fuzz/artifacts and printed in base64. Prints executions per target.
#   tests/fuzz/run_fuzzers.sh BUILD_DIR [SECONDS] [TARGET...]
# What a target finds interesting is kept in BUILD_DIR/fuzz/corpus/TARGET, so later runs go on
# from there.
set -euo pipefail

if [ $# -lt 1 ]; then
  echo "usage: $0 BUILD_DIR [SECONDS] [TARGET...]" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
seconds=${2:-60}
shift $(($# < 2 ? $# : 2))
here=$(cd "$(dirname "$0")" && pwd)
export LAYERSCOPE_FIXTURES=${LAYERSCOPE_FIXTURES:-$(cd "$here/../../.." && pwd)/shared/fixtures}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(gguf dump npy manifest eval_log tokenizer vocab chat_template wire)
fi

work=$build/fuzz
rm -rf "$work/seeds" "$work/logs" "$work/tmp"
mkdir -p "$work/seeds" "$work/logs" "$work/artifacts" "$work/tmp"
if [ -d "$LAYERSCOPE_FIXTURES" ]; then
  "$build/tests/fuzz/make_seeds" "$LAYERSCOPE_FIXTURES" "$work/seeds"
else
  echo "note: $LAYERSCOPE_FIXTURES not found: seeds only from tests/fuzz/corpus" >&2
fi

# Seed folders of each target, beside its own tests/fuzz/corpus/TARGET.
seeds_of() {
  case $1 in
    gguf) echo "$work/seeds/gguf $work/seeds/vocab $work/seeds/dump" ;;
    *) echo "$work/seeds/$1" ;;
  esac
}

if command -v llvm-symbolizer-14 > /dev/null; then
  export ASAN_SYMBOLIZER_PATH=$(command -v llvm-symbolizer-14)
fi
export UBSAN_OPTIONS=print_stacktrace=1

run_one() {
  local t=$1 dirs=() d
  mkdir -p "$work/corpus/$t" "$work/tmp/$t"
  rm -f "$work/artifacts/$t-"*
  for d in $(seeds_of "$t") "$here/corpus/$t"; do
    [ -d "$d" ] && dirs+=("$d")
  done
  local dict=() name=$t
  case $t in dump | vocab) name=gguf ;; esac
  [ -f "$here/dict/$name.dict" ] && dict=(-dict="$here/dict/$name.dict")
  local rc=0
  TMPDIR=$work/tmp/$t "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$work/artifacts/$t-" "${dict[@]}" \
    "$work/corpus/$t" "${dirs[@]}" > "$work/logs/$t.log" 2>&1 || rc=$?
  echo "$rc" > "$work/logs/$t.rc"
}

# Two at a time: a new target starts when one finishes.
for t in "${targets[@]}"; do
  if [ ! -x "$build/tests/fuzz/fuzz_$t" ]; then
    echo "error: $build/tests/fuzz/fuzz_$t is not built (cmake --build $build --target layerscope_fuzzers)" >&2
    exit 2
  fi
  while [ "$(jobs -rp | wc -l)" -ge 2 ]; do wait -n || true; done
  run_one "$t" &
done
wait

final_stat() { sed -n "s/^stat::$1: *//p" "$work/logs/$2.log" | tail -1; }
failed=()
printf '%-14s %12s %10s %8s %8s\n' target executions exec/s corpus rss_mb
for t in "${targets[@]}"; do
  printf '%-14s %12s %10s %8s %8s\n' "$t" "$(final_stat number_of_executed_units "$t")" \
    "$(final_stat average_exec_per_sec "$t")" "$(find "$work/corpus/$t" -type f | wc -l)" "$(final_stat peak_rss_mb "$t")"
  [ "$(cat "$work/logs/$t.rc")" = 0 ] || failed+=("$t")
done
rm -rf "$work/tmp"

for t in "${failed[@]}"; do
  echo
  echo "==== fuzz_$t failed (exit $(cat "$work/logs/$t.rc")); the end of its log:"
  tail -n 60 "$work/logs/$t.log"
  for a in "$work/artifacts/$t-"*; do
    [ -f "$a" ] || continue
    echo "---- $a ($(wc -c < "$a") bytes), base64:"
    head -c 65536 "$a" | base64
  done
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzzing found problems in: ${failed[*]}" >&2
  exit 1
fi
echo "fuzzing: no crash in ${#targets[@]} targets, ${seconds} s each"
