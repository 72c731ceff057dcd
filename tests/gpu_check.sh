#!/usr/bin/env bash
# The checks of a GPU lease in one run, as issue 29 asks: GPU time is short, so everything that
# needs the device happens here, each step under its own time limit, with its log in OUT.
#
#   tests/gpu_check.sh BUILD OUT [LLAMA_BENCH]
#
# BUILD is a build folder with the CUDA module (BUILD/app/layerscope, BUILD/lib, BUILD/tests);
# OUT receives the logs, bench.json (our figures) and llama-bench.json; LLAMA_BENCH, when given,
# is a llama-bench built with CUDA, run on the same file so that the ratios come from one card.
# Steps, in order of their worth when time runs out:
#   1. bench on the TinyLlama-1.1B shape at Q4_K: a 512-token prompt; 128 decoded tokens in run
#      mode, step mode (a sync per event), with statistics of every event and with full captures;
#      the same in exact mode; then llama-bench (pp512, tg128).
#   2. the CUDA suites on the device: test-backend-ops (every op and weight format), the backend
#      A/B, the fixture models' tokens and events (LAYERSCOPE_FIXTURES when set), and the whole-model
#      suites of the dense and MoE architectures on the GPU (LAYERSCOPE_TEST_CUDA=device), limited
#      to the cases in CUDA_MODEL_CASES, DENSE_CASES and MOE_CASES when those are set (their
#      files must be present: a lease carries only so much).
set -u
if [ $# -lt 2 ]; then
    echo "usage: $0 BUILD OUT [LLAMA_BENCH]" >&2
    exit 2
fi
build=$(cd "$1" && pwd) || exit 2
out=$2
llama_bench=${3:-}
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
ls_bin=$build/app/layerscope
work=$(mktemp -d "${TMPDIR:-/tmp}/layerscope-gpu-check-XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
status=0

step() {  # step NAME SECONDS COMMAND...: runs it with a limit, its output in OUT/NAME.log
    local name=$1 limit=$2
    shift 2
    local t0=$SECONDS
    timeout --kill-after=10 "$limit" "$@" > "$out/$name.log" 2>&1
    local rc=$?
    printf '%-28s rc %3d  %4d s\n' "$name" "$rc" "$((SECONDS - t0))" | tee -a "$out/steps.txt"
    [ $rc -eq 0 ] || status=1
    return $rc
}

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv \
    > "$out/gpu.txt" 2>&1
cat "$out/gpu.txt"
nproc >> "$out/gpu.txt"

# 1. Speed.
model=$work/tl.gguf
step make_model 120 "$ls_bin" make-model "$model" --preset tinyllama-1.1b --type q4_K
bench() {  # bench NAME ARGS...: one JSON object per line of OUT/bench.jsonl
    local name=$1
    shift
    if step "bench_$name" 150 "$ls_bin" bench -m "$model" --backend cuda --json "$@"; then
        python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["name"]=sys.argv[2]; print(json.dumps(d))' \
            "$out/bench_$name.log" "$name" >> "$out/bench.jsonl"
    fi
}
if [ -f "$model" ]; then
    bench prompt512 --prompt-tokens 512 --gen 0 -r 5
    bench decode128 --prompt-tokens 1 --gen 128 -r 5
    bench decode128_step --prompt-tokens 1 --gen 128 -r 5 --sync event
    bench decode128_stats --prompt-tokens 1 --gen 128 -r 5 --capture stats
    bench decode128_all --prompt-tokens 1 --gen 128 -r 5 --capture all
    bench exact_prompt512 --mode exact --prompt-tokens 512 --gen 0 -r 5
    bench exact_decode128 --mode exact --prompt-tokens 1 --gen 128 -r 5
    if [ -n "$llama_bench" ]; then
        # The JSON alone on stdout; ggml's device lines (stderr) in the log.
        step llama_bench 180 sh -c 'out=$1; shift; "$@" > "$out"' sh "$out/llama-bench.json" \
            "$llama_bench" -m "$model" -ngl 99 -fa 0 -p 512 -n 128 -r 5 -o json
    fi
fi

# 2. Correctness on the device.
tests=$build/tests
export LAYERSCOPE_TEST_CUDA=device
# The loader's cases each in a process of their own, as ctest runs them (the module is loaded once
# per process).
for c in $("$tests/test_cuda_loader" --gtest_list_tests | awk '/^[^ ]/{s=$1} /^  /{print s $1}'); do
    step "cuda_loader_${c#*.}" 60 "$tests/test_cuda_loader" --gtest_filter="$c"
done
step backend_ops 400 "$tests/test_backend_ops"
step backend_ab 200 "$tests/test_backend_ab"
cases_filter() {  # cases_filter SUITE CASES...
    local suite=$1 f=""
    shift
    for c in "$@"; do f="$f${f:+:}*/$suite.*/$c"; done
    echo "$f"
}
if [ -n "${LAYERSCOPE_FIXTURES:-}" ]; then
    filter='*_cuda:*/cuda'
    # shellcheck disable=SC2086
    [ -n "${CUDA_MODEL_CASES:-}" ] && filter=$(cases_filter CudaModels $CUDA_MODEL_CASES)
    step cuda_models 200 "$tests/test_cuda_models" --gtest_filter="$filter"
fi
if [ -n "${DENSE_CASES:-}" ]; then
    # shellcheck disable=SC2086
    step dense_archs_gpu 300 "$tests/test_dense_archs" --gtest_filter="$(cases_filter DenseArchsCuda $DENSE_CASES)"
fi
if [ -n "${MOE_CASES:-}" ]; then
    # shellcheck disable=SC2086
    step moe_archs_gpu 300 "$tests/test_moe_archs" --gtest_filter="$(cases_filter MoeArchsCuda $MOE_CASES)"
fi

# The summary: our figures against llama-bench's, and the goals of issue 29.
python3 - "$out" <<'EOF' | tee "$out/summary.txt"
import json, os, sys
out = sys.argv[1]
ours = {}
if os.path.exists(f"{out}/bench.jsonl"):
    for line in open(f"{out}/bench.jsonl"):
        d = json.loads(line)
        ours[d["name"]] = d
def tps(name, key):
    return ours[name][key] if name in ours else None
llama = {}
try:
    for row in json.load(open(f"{out}/llama-bench.json")):
        kind = "pp" if row["n_gen"] == 0 else "tg"
        llama[kind] = row["avg_ts"]
except Exception as e:
    print("llama-bench: no figures:", e)
def line(what, ours_v, ref_v):
    if ours_v is None:
        print(f"{what:40s} ours: not measured")
    elif ref_v is None:
        print(f"{what:40s} ours {ours_v:10.1f} tok/s")
    else:
        print(f"{what:40s} ours {ours_v:10.1f} tok/s  llama.cpp {ref_v:10.1f}  ratio {ours_v / ref_v:5.2f}x")
line("prompt 512, llama mode", tps("prompt512", "prompt_tps"), llama.get("pp"))
line("decode 128, run mode, llama mode", tps("decode128", "gen_tps"), llama.get("tg"))
line("prompt 512, exact mode", tps("exact_prompt512", "prompt_tps"), llama.get("pp"))
line("decode 128, run mode, exact mode", tps("exact_decode128", "gen_tps"), llama.get("tg"))
run, step = tps("decode128", "gen_tps"), tps("decode128_step", "gen_tps")
if run and step:
    print(f"{'step mode decode':40s} {step:10.1f} tok/s: {run / step:5.2f}x the time of run mode")
for name, what in (("decode128_stats", "statistics of every event"), ("decode128_all", "full captures")):
    if name in ours:
        print(f"{what:40s} {ours[name]['capture_overhead']:5.2f}x the time without (decode 128)")
EOF
echo "gpu_check: $( [ $status -eq 0 ] && echo 'every step passed' || echo 'a step failed (steps.txt)' )"
exit $status
