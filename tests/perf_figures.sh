#!/bin/bash
# Every performance figure the README quotes, measured here and now, with the machine and the date:
# Layerscope's `bench` in rounds interleaved with llama.cpp's `llama-bench` on make-model files of
# the TinyLlama-1.1B, Llama-3.1-8B and Qwen3.5-4B shapes (Q4_K), the 1B-class presets at Q4_K_M and IQ4_XS,
# long prompts and decoding after a deep cache, `compare` of two dumps, what capturing costs, the
# GUI's peak memory capturing a 512-token prompt of the 8B shape, and make-model's own time; on request, the 8B shape's decode in Q5_K, Q6_K and Q8_0, and the two large
# mixtures of experts (gpt-oss-20b at MXFP4, qwen3-30b-a3b at Q4_K) with both engines' peak memory.
#
#   tests/perf_figures.sh [--layerscope BIN] [--llama-bench BIN] [--work DIR] [--rounds N] [--parts LIST]
#
#   --layerscope   the binary to measure (default: build/app/layerscope)
#   --llama-bench  llama.cpp's llama-bench at the fixtures' commit, built for this processor; without
#                  it only our figures are printed
#   --llama-quantize  its llama-quantize (default: beside llama-bench), which makes the 1b part's
#                  Q4_K_M and IQ4_XS files as real downloads are made
#   --work         where the models and dumps go (default /tmp/layerscope-figures; the models are
#                  kept between runs, the dumps removed)
#   --rounds       interleaved rounds per figure (default 3); medians are reported
#   --parts        a comma list of: tl, tl-long, 8b, 8b-formats, qwen35, 1b, compare, capture,
#                  gui-capture (needs xvfb-run), make-model, moe (default: all but 8b-formats and moe;
#                  about an hour and a half on 2 cores). 8b-formats makes files of 5.5, 6.6 and 8.5 GB (about 4 minutes each, once);
#                  moe makes files of 12 and 17 GB (about 7 and 40 minutes, once) and needs 24 GB of
#                  memory
#
# Each ratio is ours / llama.cpp's within a round; the summary gives the median over the rounds.
# Nothing else should run meanwhile: the figures are memory-bound and the machine's bandwidth is
# what they measure.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
ls_bin="$here/build/app/layerscope"
llama_bench=""
llama_quantize=""
work=/tmp/layerscope-figures
rounds=3
parts="tl,tl-long,8b,qwen35,1b,compare,capture,gui-capture,make-model"
while [ $# -gt 0 ]; do
    case "$1" in
        --layerscope) ls_bin="$2"; shift 2 ;;
        --llama-bench) llama_bench="$2"; shift 2 ;;
        --llama-quantize) llama_quantize="$2"; shift 2 ;;
        --work) work="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --parts) parts="$2"; shift 2 ;;
        -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
        *) echo "perf_figures.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[ -x "$ls_bin" ] || { echo "perf_figures.sh: $ls_bin is not an executable (build first, or --layerscope)" >&2; exit 2; }
if [ -n "$llama_bench" ] && [ ! -x "$llama_bench" ]; then
    echo "perf_figures.sh: --llama-bench $llama_bench is not an executable" >&2; exit 2
fi
case "$rounds" in ''|*[!0-9]*|0) echo "perf_figures.sh: --rounds must be a positive number" >&2; exit 2 ;; esac
command -v python3 > /dev/null || { echo "perf_figures.sh: python3 is needed to read the JSON figures" >&2; exit 2; }
mkdir -p "$work"
results="$work/results.tsv"
: > "$results"
want() { case ",$parts," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores," \
     "$(grep -m1 -o -w 'avx512f' /proc/cpuinfo || echo 'no AVX-512'), $(free -g | awk '/Mem:/ {print $2}') GB"
echo "date:    $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "commit:  $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "llama:   ${llama_bench:-none (ours only)}"

# record MEASURE ROUND WHO VALUE: one figure of one round.
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >> "$results"; printf '  %-34s round %s  %-6s %s\n' "$1" "$2" "$3" "$4"; }
json() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
# read_fresh FILE: the file's pages dropped from the page cache (written back first) and read in
# again in order, so that every round meets pages of one kind: those sequential reads make (large
# folios where the kernel makes them). A file just written by make-model keeps the pages its
# writes made (on Linux 6.18 partly large folios). Since e07a776 our CPU decode reads the weights
# from a copy of its own; llama.cpp reads Q5_K, Q6_K and Q8_0 weights from the mapping (its Q4_K
# ones from a repacked copy), and the mapping's pages set its speed.
read_fresh() {
    sync "$1"
    dd if="$1" iflag=nocache count=0 status=none
    cat "$1" > /dev/null
}
# ours MEASURE ROUND KEY ARGS...: one `layerscope bench --json` run, its KEY recorded.
ours() {
    local measure=$1 round=$2 key=$3; shift 3
    record "$measure" "$round" ours "$("$ls_bin" bench --threads 2 --json "$@" | json "['$key']")"
}
# theirs MEASURE ROUND ARGS...: one llama-bench run (its mean tokens/s) recorded.
theirs() {
    local measure=$1 round=$2; shift 2
    [ -n "$llama_bench" ] || return 0
    record "$measure" "$round" llama \
        "$(LD_LIBRARY_PATH="$(dirname "$llama_bench")" "$llama_bench" -t 2 -o json "$@" | json "[0]['avg_ts']")"
}

tl="$work/tl.gguf"
l8b="$work/l8b.gguf"
make_tl() {
    [ -f "$tl" ] || "$ls_bin" make-model "$tl" --type q4_K --embd 2048 --layers 22 --heads 32 --kv-heads 4 \
        --ff 5632 --vocab 32000 > /dev/null
}
make_8b() {
    [ -f "$l8b" ] || "$ls_bin" make-model "$l8b" --type q4_K --embd 4096 --layers 32 --heads 32 --kv-heads 8 \
        --ff 14336 --vocab 128256 --seed 1 > /dev/null
}

if want make-model; then
    echo "make-model of the 8B shape (Q4_K):"
    rm -f "$work/l8b-timed.gguf"
    start=$(date +%s.%N)
    "$ls_bin" make-model "$work/l8b-timed.gguf" --type q4_K --embd 4096 --layers 32 --heads 32 --kv-heads 8 \
        --ff 14336 --vocab 128256 --seed 1 > /dev/null
    record "make-model 8B Q4_K (s)" 1 ours "$(python3 -c "print(round($(date +%s.%N) - $start, 1))")"
    [ -f "$l8b" ] || mv "$work/l8b-timed.gguf" "$l8b"
    rm -f "$work/l8b-timed.gguf"
fi

if want tl; then
    make_tl
    read_fresh "$tl"
    echo "1.1B shape: prompt 64 (-r 3), decode 32 from an empty context (-r 1):"
    for r in $(seq "$rounds"); do
        ours "1.1B prompt 64, llama mode" "$r" prompt_tps -m "$tl" --mode llama --prompt-tokens 64 --gen 0 -r 3
        ours "1.1B prompt 64, exact mode" "$r" prompt_tps -m "$tl" --mode exact --prompt-tokens 64 --gen 0 -r 3
        theirs "1.1B prompt 64" "$r" -m "$tl" -p 64 -n 0 -r 3
        ours "1.1B decode, llama mode" "$r" gen_tps -m "$tl" --mode llama --prompt-tokens 1 --gen 32 -r 1
        ours "1.1B decode, exact mode" "$r" gen_tps -m "$tl" --mode exact --prompt-tokens 1 --gen 32 -r 1
        theirs "1.1B decode" "$r" -m "$tl" -p 0 -n 32 -r 1
    done
fi

if want tl-long; then
    make_tl
    read_fresh "$tl"
    echo "1.1B shape: a 2048-token prompt, and decode 32 after 2048 cached tokens (flash attention off):"
    for r in $(seq "$rounds"); do
        ours "1.1B prompt 2048, llama mode" "$r" prompt_tps -m "$tl" --mode llama --prompt-tokens 2048 --gen 0 -r 1
        ours "1.1B prompt 2048, exact mode" "$r" prompt_tps -m "$tl" --mode exact --prompt-tokens 2048 --gen 0 -r 1
        theirs "1.1B prompt 2048" "$r" -m "$tl" -p 2048 -n 0 -r 1 -fa 0
        ours "1.1B decode at depth 2048, llama mode" "$r" gen_tps -m "$tl" --mode llama --depth 2048 --prompt-tokens 1 --gen 32 -r 1
        ours "1.1B decode at depth 2048, exact mode" "$r" gen_tps -m "$tl" --mode exact --depth 2048 --prompt-tokens 1 --gen 32 -r 1
        theirs "1.1B decode at depth 2048" "$r" -m "$tl" -d 2048 -p 0 -n 32 -r 1 -fa 0
    done
fi

if want 8b; then
    make_8b
    read_fresh "$l8b"
    echo "8B shape: decode 16 from an empty context and prompt 64 (-r 3):"
    for r in $(seq "$rounds"); do
        ours "8B decode, llama mode" "$r" gen_tps -m "$l8b" --mode llama --prompt-tokens 1 --gen 16 -r 3
        ours "8B decode, exact mode" "$r" gen_tps -m "$l8b" --mode exact --prompt-tokens 1 --gen 16 -r 3
        theirs "8B decode" "$r" -m "$l8b" -p 0 -n 16 -r 3
        ours "8B prompt 64, llama mode" "$r" prompt_tps -m "$l8b" --mode llama --prompt-tokens 64 --gen 0 -r 3
        ours "8B prompt 64, exact mode" "$r" prompt_tps -m "$l8b" --mode exact --prompt-tokens 64 --gen 0 -r 3
        theirs "8B prompt 64" "$r" -m "$l8b" -p 64 -n 0 -r 3
    done
    ours "8B peak RSS, decode (MiB)" 1 peak_rss_bytes -m "$l8b" --prompt-tokens 1 --gen 4 -r 1
fi

if want 8b-formats; then
    echo "8B shape in the other formats real downloads use (Q5_K, Q6_K, Q8_0 in every matrix): decode 16"
    echo "from an empty context (-r 3), each file read into the page cache afresh before its rounds:"
    for type in q5_K q6_K q8_0; do
        m="$work/l8b-$type.gguf"
        [ -f "$m" ] || "$ls_bin" make-model "$m" --type "$type" --embd 4096 --layers 32 --heads 32 --kv-heads 8 \
            --ff 14336 --vocab 128256 --seed 1 > /dev/null
        read_fresh "$m"
        label=${type^^}
        for r in $(seq "$rounds"); do
            ours "8B $label decode, llama mode" "$r" gen_tps -m "$m" --mode llama --prompt-tokens 1 --gen 16 -r 3
            ours "8B $label decode, exact mode" "$r" gen_tps -m "$m" --mode exact --prompt-tokens 1 --gen 16 -r 3
            theirs "8B $label decode" "$r" -m "$m" -p 0 -n 16 -r 3
        done
    done
fi

if want qwen35; then
    q35="$work/qwen35-4b.gguf"
    [ -f "$q35" ] || "$ls_bin" make-model "$q35" --preset qwen3.5-4b --type q4_K > /dev/null
    read_fresh "$q35"
    echo "Qwen3.5-4B shape (Gated DeltaNet): decode 16 from an empty context and prompt 64 (-r 3):"
    for r in $(seq "$rounds"); do
        ours "qwen35 4B decode, llama mode" "$r" gen_tps -m "$q35" --mode llama --prompt-tokens 1 --gen 16 -r 3
        theirs "qwen35 4B decode" "$r" -m "$q35" -p 0 -n 16 -r 3
        ours "qwen35 4B prompt 64, llama mode" "$r" prompt_tps -m "$q35" --mode llama --prompt-tokens 64 --gen 0 -r 3
        theirs "qwen35 4B prompt 64" "$r" -m "$q35" -p 64 -n 0 -r 3
    done
fi

if want 1b; then
    quantize=${llama_quantize:-${llama_bench:+$(dirname "$llama_bench")/llama-quantize}}
    if [ -z "$quantize" ] || [ ! -x "$quantize" ]; then
        echo "1B-class presets: skipped (they are quantized by llama.cpp's llama-quantize: give --llama-bench or --llama-quantize)"
    else
        echo "1B-class presets, quantized by llama-quantize: prompt 64 (-r 3), decode 32 from an empty context (-r 1):"
        for preset in gemma-3-1b llama-3.2-1b qwen3-0.6b; do
            f16="$work/$preset-F16.gguf"
            for q in Q4_K_M IQ4_XS; do
                m="$work/$preset-$q.gguf"
                [ -f "$m" ] && continue
                [ -f "$f16" ] || "$ls_bin" make-model "$f16" --preset "$preset" > /dev/null
                LD_LIBRARY_PATH="$(dirname "$quantize")" "$quantize" "$f16" "$m" "$q" 2 > /dev/null 2>&1 ||
                    { echo "perf_figures.sh: llama-quantize failed on $f16 ($q)" >&2; exit 1; }
            done
            rm -f "$f16"
        done
        for preset in gemma-3-1b llama-3.2-1b qwen3-0.6b; do
            for q in Q4_K_M IQ4_XS; do read_fresh "$work/$preset-$q.gguf"; done
        done
        for r in $(seq "$rounds"); do
            for preset in gemma-3-1b llama-3.2-1b qwen3-0.6b; do
                for q in Q4_K_M IQ4_XS; do
                    m="$work/$preset-$q.gguf"
                    ours "$preset $q prompt 64, llama mode" "$r" prompt_tps -m "$m" --mode llama --prompt-tokens 64 --gen 0 -r 3
                    theirs "$preset $q prompt 64" "$r" -m "$m" -p 64 -n 0 -r 3 -fa 0
                    ours "$preset $q decode, llama mode" "$r" gen_tps -m "$m" --mode llama --prompt-tokens 1 --gen 32 -r 1
                    theirs "$preset $q decode" "$r" -m "$m" -p 0 -n 32 -r 1 -fa 0
                done
            done
        done
    fi
fi

if want moe; then
    echo "mixtures of experts: decode 32 from an empty context (-r 3), each round's order alternated (the"
    echo "engine that runs right after the other is slowed while the machine's memory settles), peak RSS:"
    for spec in gpt-oss-20b:mxfp4:MXFP4 qwen3-30b-a3b:q4_K:Q4_K; do
        IFS=: read -r preset type label <<< "$spec"
        m="$work/$preset-$label.gguf"
        [ -f "$m" ] || "$ls_bin" make-model "$m" --preset "$preset" --type "$type" > /dev/null
    done
    moe_ours() {
        local out
        out=$("$ls_bin" bench --threads 2 --json -m "$1" --mode llama --prompt-tokens 1 --gen 32 -r 3)
        record "$2 decode, llama mode" "$3" ours "$(json "['gen_tps']" <<< "$out")"
        record "$2 peak RSS" "$3" ours "$(json "['peak_rss_bytes']" <<< "$out")"
    }
    moe_theirs() {
        [ -n "$llama_bench" ] || return 0
        local out
        out=$( (LD_LIBRARY_PATH="$(dirname "$llama_bench")" /usr/bin/time -f 'peak_rss_kb %M' -o "$work/rss.txt" \
                "$llama_bench" -t 2 -o json -m "$1" -p 0 -n 32 -r 3) )
        record "$2 decode" "$3" llama "$(json "[0]['avg_ts']" <<< "$out")"
        record "$2 peak RSS" "$3" llama "$(( $(sed -n 's/^peak_rss_kb //p' "$work/rss.txt") * 1024 ))"
        rm -f "$work/rss.txt"
    }
    for r in $(seq "$rounds"); do
        for spec in gpt-oss-20b:MXFP4 qwen3-30b-a3b:Q4_K; do
            IFS=: read -r preset label <<< "$spec"
            m="$work/$preset-$label.gguf"
            if [ $((r % 2)) = 1 ]; then
                moe_ours "$m" "$preset $label" "$r"; moe_theirs "$m" "$preset $label" "$r"
            else
                moe_theirs "$m" "$preset $label" "$r"; moe_ours "$m" "$preset $label" "$r"
            fi
        done
    done
fi

if want capture; then
    make_tl
    echo "1.1B shape: what capturing every event costs (64-token prompt, 32 decoded, -r 3):"
    for r in $(seq "$rounds"); do
        ours "capture stats (x the time without)" "$r" capture_overhead -m "$tl" --capture stats -r 3
        ours "capture all (x the time without)" "$r" capture_overhead -m "$tl" --capture all -r 3
    done
fi

if want gui-capture; then
    if ! command -v xvfb-run > /dev/null; then
        echo "GUI capture: skipped (it needs xvfb-run)"
    else
        make_8b
        read_fresh "$l8b"
        # A story's words, as many as make 512 tokens in the 8B shape's vocabulary (with its BOS,
        # as the GUI's prompt is tokenized): a long text cut where its 513th token starts.
        long=$(python3 -c "w = 'Once upon a time there was a little girl named Lily who loved to play outside in the park with her friends.'.split(); print(' '.join(w[i % len(w)] for i in range(2000)))")
        text=$("$ls_bin" tokenize -m "$l8b" -p "$long" --no-escape --json | python3 -c "
import json, sys
t = json.load(sys.stdin)['tokens']
print(sys.argv[1].encode()[:t[512]['offset']].decode())" "$long")
        n=$("$ls_bin" tokenize -m "$l8b" -p "$text" --no-escape --show-count | sed -n 's/^Total number of tokens: //p')
        echo "GUI, 8B shape (--backend cpu): a $n-token prompt run to the end with every event captured, once each:"
        for budget in default 2G; do
            dir=$(mktemp -d "$work/gui.XXXXXX")
            printf 'wait\nprompt %s\nwait\nkey F5\nwait\nquit\n' "$text" > "$dir/script"
            flags=()
            [ "$budget" = default ] || flags=(--capture-budget "$budget")
            /usr/bin/time -f 'peak_rss_kb %M' -o "$dir/rss" xvfb-run -a -s "-screen 0 1280x800x24" \
                "$ls_bin" "$l8b" --backend cpu "${flags[@]}" --script "$dir/script" --state-log "$dir/log" > /dev/null 2>&1
            grep -q '^state finished ' "$dir/log" ||
                { echo "perf_figures.sh: the GUI's run did not finish (its log: $dir/log)" >&2; exit 1; }
            # captures N tensors BYTES bytes budget BUDGET evicted EVICTED
            read -r _ _ _ bytes _ _ limit _ evicted <<< "$(grep '^captures ' "$dir/log" | tail -n 1)"
            record "GUI capture ($budget): budget (GiB)" 1 ours "$(python3 -c "print($limit / 2**30)")"
            record "GUI capture ($budget): values kept (GiB)" 1 ours "$(python3 -c "print($bytes / 2**30)")"
            record "GUI capture ($budget): values dropped" 1 ours "$evicted"
            record "GUI capture ($budget): peak RSS" 1 ours "$(( $(sed -n 's/^peak_rss_kb //p' "$dir/rss") * 1024 ))"
            rm -rf "$dir"
        done
    fi
fi

if want compare; then
    make_tl
    echo "compare of two dumps (1.1B shape, 64 tokens + 4 decoded, llama against exact mode, in the page cache):"
    tokens=$(python3 -c "print(','.join(str(1 + (i * 7919) % 31999) for i in range(64)))")
    for mode in llama exact; do
        "$ls_bin" run -m "$tl" --tokens "$tokens" -n 4 --mode "$mode" --threads 2 --dump "$work/dump-$mode.gguf" --force > /dev/null
    done
    cat "$work/dump-llama.gguf" "$work/dump-exact.gguf" > /dev/null
    for r in $(seq "$rounds"); do
        # Exit 1: the two modes differ (they do, slightly); the figures are what counts here.
        out=$( (/usr/bin/time -f 'peak_rss_kb %M' "$ls_bin" compare "$work/dump-llama.gguf" "$work/dump-exact.gguf" \
                --threads 2 --json > "$work/compare.json") 2>&1 | tail -1) || true
        record "compare (GB/s)" "$r" ours "$(json "['volume']['gb_per_s']" < "$work/compare.json")"
        record "compare peak RSS (MiB)" "$r" ours "$(( ${out#peak_rss_kb } / 1024 ))"
    done
    rm -f "$work/dump-llama.gguf" "$work/dump-exact.gguf" "$work/compare.json"
fi

echo
echo "summary (medians over the rounds; ratio: ours / llama.cpp within each round):"
python3 - "$results" <<'EOF'
import sys, statistics
from collections import defaultdict
rows = [line.rstrip('\n').split('\t') for line in open(sys.argv[1]) if line.strip()]
values = defaultdict(lambda: defaultdict(dict))  # measure -> who -> round -> value
order = []
for measure, rnd, who, value in rows:
    if measure not in order:
        order.append(measure)
    values[measure][who][rnd] = float(value)
def base(measure):  # "1.1B prompt 64, llama mode" -> "1.1B prompt 64"
    return measure.split(', ')[0]
for measure in order:
    ours = values[measure].get('ours')
    if not ours:
        continue
    v = list(ours.values())
    scale = 1 / 1048576 if 'RSS' in measure and max(v) > 1e6 else 1
    line = f"  {measure:40s} {statistics.median(v) * scale:10.2f}"
    if len(v) > 1:
        line += f"  ({min(v) * scale:.2f}-{max(v) * scale:.2f})"
    theirs = values.get(base(measure), {}).get('llama', {})
    ratios = [ours[r] / theirs[r] for r in ours if r in theirs and theirs[r] > 0]
    if ratios:
        line += f"   llama.cpp {statistics.median(theirs.values()) * scale:.2f}, ratio {statistics.median(ratios):.2f}x"
        line += f" ({min(ratios):.2f}-{max(ratios):.2f})"
    print(line)
EOF
