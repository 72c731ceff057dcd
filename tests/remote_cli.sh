#!/usr/bin/env bash
# Remote headless commands end to end: a real `layerscope serve` on loopback and real clients.
# run, export and compare with --remote print what they print locally and exit as they exit
# locally, their output files land on the client; then the refusals (wrong token, a token file
# others may read, a path outside the served folders, a frame above the limit, an existing output)
# and the faults (a client killed mid-command, the network cut mid-transfer, the server killed).
# Prints the time of a remote run at 0, 20 and 100 ms of added latency (a proxy of its own), and
# with BENCH_REMOTE (tests/bench_remote) a live session's command-to-snapshot time and bytes.
#   tests/remote_cli.sh LAYERSCOPE_BINARY [BENCH_REMOTE]
set -euo pipefail
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  wait 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  echo "---- server log:" >&2
  cat "$work/serve.log" >&2 || true
  exit 1
}
mkdir -p "$work/root" "$work/client" "$work/local"
export XDG_CONFIG_HOME=$work/server-config

"$bin" make-model "$work/root/tiny.gguf" --seed 3 > /dev/null
"$bin" make-model "$work/root/wide.gguf" --seed 4 --embd 512 --layers 4 --ff 2048 --heads 8 --kv-heads 8 > /dev/null

# serve_on OUT SERVE-ARGS...: a `layerscope serve` in the background printing to OUT; sets
# served_pid and served_addr once it listens.
serve_on() {
  local out=$1
  shift
  "$bin" serve --listen 127.0.0.1:0 --root "$work/root" "$@" > "$out" 2>> "$work/serve.log" &
  served_pid=$!
  pids+=("$served_pid")
  for _ in $(seq 100); do
    grep -q "listening on" "$out" 2> /dev/null && break
    sleep 0.1
  done
  served_addr=$(sed -n 's/^layerscope serve: listening on //p' "$out")
  [ -n "$served_addr" ] || fail "the server ($*) did not start: $(cat "$out")"
}
serve_on "$work/serve.out"
server_pid=$served_pid
addr=$served_addr
token=$XDG_CONFIG_HOME/layerscope/serve-token
[ "$(stat -c %a "$token")" = 600 ] || fail "the token file's mode is $(stat -c %a "$token"), not 600"
grep -q "token:   $token, new" "$work/serve.out" || fail "serve does not say where the new token is"
cp -p "$token" "$work/client/token"
remote=(--remote "$addr" --token-file "$work/client/token")

# --- the same output and exit code as locally (the time line aside) ---
(cd "$work/root" && "$bin" run -m tiny.gguf --tokens 1,2,3 -n 4 > "$work/local/run.txt")
(cd "$work/client" && "$bin" run "${remote[@]}" -m tiny.gguf --tokens 1,2,3 -n 4 > "$work/client/run.txt")
diff <(grep -v '^time:' "$work/local/run.txt") <(grep -v '^time:' "$work/client/run.txt") || fail "remote run printed something else"
grep -q '^generated: 4 tokens' "$work/client/run.txt" || fail "remote run: $(cat "$work/client/run.txt")"

# A dump comes back to the client's disk and matches the local one.
(cd "$work/root" && "$bin" run -m tiny.gguf --tokens 1,2,3 -n 2 --dump "$work/local/tiny.gguf" > /dev/null)
(cd "$work/client" && "$bin" run "${remote[@]}" -m tiny.gguf --tokens 1,2,3 -n 2 --dump here.gguf > "$work/client/dump.txt")
[ -f "$work/client/here.gguf" ] || fail "the dump did not land on the client"
grep -q -- '-> here.gguf$' "$work/client/dump.txt" || fail "the dump line names another path than the client's: $(cat "$work/client/dump.txt")"
"$bin" compare "$work/local/tiny.gguf" "$work/client/here.gguf" > "$work/compare-dumps.txt" || fail "the remote dump differs from the local one: $(tail -5 "$work/compare-dumps.txt")"
# An existing output without --force: refused before anything runs, as locally (exit 2).
set +e
"$bin" run "${remote[@]}" -m tiny.gguf --tokens 1,2 -n 1 --dump "$work/client/here.gguf" > /dev/null 2> "$work/exists.err"
rc=$?
set -e
[ $rc = 2 ] || fail "an existing --dump target: exit $rc, not 2"
(cd "$work/client" && "$bin" run "${remote[@]}" -m tiny.gguf --tokens 1,2 -n 1 --dump=here.gguf --force > /dev/null) || fail "--dump=... --force"

# export --npy: a folder on the client, the same files as a local export.
(cd "$work/root" && "$bin" export -m tiny.gguf --tokens 1,2,3 --events 'attn_norm-*,result_output' --npy "$work/local/npy" > /dev/null)
"$bin" export "${remote[@]}" -m tiny.gguf --tokens 1,2,3 --events 'attn_norm-*,result_output' --npy "$work/client/npy" > "$work/client/export.txt"
diff -r -x '.layerscope-folder.json' "$work/local/npy" "$work/client/npy" || fail "the remote .npy export differs from the local one"
# export --gguf
"$bin" export "${remote[@]}" -m tiny.gguf --tokens 1,2,3 --gguf "$work/client/ex.gguf" > /dev/null
[ -s "$work/client/ex.gguf" ] || fail "export --gguf did not land"

# compare: a server-side reference (the server's path), the same report and exit code.
cp "$work/local/tiny.gguf" "$work/root/ref.gguf"
set +e
(cd "$work/root" && "$bin" compare -m tiny.gguf -r ref.gguf --mode exact > "$work/local/compare.txt")
rc_local=$?
"$bin" compare "${remote[@]}" -m tiny.gguf -r ref.gguf --mode exact > "$work/client/compare.txt"
rc_remote=$?
set -e
[ $rc_local = $rc_remote ] || fail "compare: exit $rc_remote remotely, $rc_local locally"
diff <(grep -v -i 'time\|seconds\| ms' "$work/local/compare.txt") <(grep -v -i 'time\|seconds\| ms' "$work/client/compare.txt") > /dev/null || fail "compare printed something else remotely"
# compare: a reference here (outside the server's folders) is uploaded for the command, and the
# report names it by its path here; "server:PATH" is the server's.
cp "$work/local/tiny.gguf" "$work/client/mine.gguf"
set +e
(cd "$work/root" && "$bin" compare -m tiny.gguf -r "$work/client/mine.gguf" --mode exact > "$work/local/compare-here.txt")
rc_local=$?
"$bin" compare "${remote[@]}" -m tiny.gguf -r "$work/client/mine.gguf" --mode exact > "$work/client/compare-here.txt"
rc_remote=$?
"$bin" compare "${remote[@]}" -m tiny.gguf -r server:ref.gguf --mode exact > "$work/client/compare-server.txt"
rc_server=$?
set -e
[ $rc_local = $rc_remote ] || fail "compare of an uploaded reference: exit $rc_remote remotely, $rc_local locally"
diff <(grep -v -i 'time\|seconds\| ms' "$work/local/compare-here.txt") <(grep -v -i 'time\|seconds\| ms' "$work/client/compare-here.txt") ||
  fail "compare of an uploaded reference printed something else remotely"
grep -q "uploaded mine.gguf" "$work/serve.log" || fail "the server did not take the upload: $(cat "$work/serve.log")"
[ $rc_server = $rc_local ] || fail "compare -r server:ref.gguf: exit $rc_server"
[ -f "$work/client/mine.gguf" ] || fail "the uploaded reference is gone from here"

# --- refusals ---
expect() {  # expect EXIT_CODE TEXT command...
  local code=$1 text=$2
  shift 2
  set +e
  "$@" > "$work/out.txt" 2> "$work/err.txt"
  local rc=$?
  set -e
  [ $rc = "$code" ] || fail "$*: exit $rc, not $code; stderr: $(cat "$work/err.txt")"
  grep -qF -- "$text" "$work/err.txt" || fail "$*: stderr lacks '$text': $(cat "$work/err.txt")"
}
expect 2 "--mode" "$bin" run "${remote[@]}" -m tiny.gguf --tokens 1 --mode bogus
expect 3 "is outside the folders this server reads" "$bin" run "${remote[@]}" -m /etc/hostname --tokens 1
expect 3 "is outside the folders this server reads" "$bin" run "${remote[@]}" -m ../serve.log --tokens 1
expect 3 "is outside the folders this server reads" "$bin" compare "${remote[@]}" -m tiny.gguf -r server:/etc/passwd
printf '0123456789abcdef0123456789abcdeX\n' > "$work/client/bad-token"
chmod 600 "$work/client/bad-token"
expect 3 "refused the connection: wrong token" "$bin" run --remote "$addr" --token-file "$work/client/bad-token" -m tiny.gguf --tokens 1
grep -q "refused: wrong token" "$work/serve.log" || fail "the wrong token was not logged"
cp "$work/client/token" "$work/client/open-token"
chmod 644 "$work/client/open-token"
expect 3 "chmod 600" "$bin" run --remote "$addr" --token-file "$work/client/open-token" -m tiny.gguf --tokens 1
# A frame header claiming 2 GiB, then a normal client.
python3 - "$addr" << 'PY'
import socket, struct, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)))
s.sendall(b"LSR1" + bytes([1]) + struct.pack("<I", 1 << 31))
s.settimeout(10)
try:
    assert s.recv(1) == b"", "the server kept the connection"
except ConnectionResetError:
    pass
PY
grep -q "above the limit of 4096 bytes" "$work/serve.log" || fail "the oversized frame was not refused from its header"
"$bin" run "${remote[@]}" -m tiny.gguf --tokens 1,2 -n 1 > /dev/null || fail "the server stopped serving after an oversized frame"

# --- faults ---
# A client killed mid-command: the server stops the command and serves the next client.
"$bin" run "${remote[@]}" -m wide.gguf --tokens 1,2,3 -n 2000 --mode exact > "$work/client/killed.txt" 2>&1 &
client=$!
for _ in $(seq 600); do grep -q '^prompt:' "$work/client/killed.txt" && break; sleep 0.1; done
grep -q '^prompt:' "$work/client/killed.txt" || fail "the remote run printed no prompt line: $(cat "$work/client/killed.txt")"
kill -9 $client || fail "the remote run ended before it was killed: $(cat "$work/client/killed.txt")"
wait $client 2> /dev/null || true
for _ in $(seq 100); do grep -q "went away during run" "$work/serve.log" && break; sleep 0.1; done
grep -q "went away during run; the command was stopped" "$work/serve.log" || fail "the server did not notice the client's death"
"$bin" run "${remote[@]}" -m tiny.gguf --tokens 1,2 -n 1 > /dev/null || fail "the server did not serve the next client"

# The network cut mid-transfer (a proxy that cuts after 200 kB from the server): exit 3, nothing
# left where the file would go.
python3 "$here/remote_proxy.py" "$addr" --cut-after 200000 > "$work/proxy.port" &
pids+=($!)
for _ in $(seq 50); do [ -s "$work/proxy.port" ] && break; sleep 0.1; done
cut_addr=127.0.0.1:$(head -1 "$work/proxy.port")
expect 3 "nothing was written here" "$bin" export --remote "$cut_addr" --token-file "$work/client/token" -m wide.gguf --tokens 1,2,3 \
  --gguf "$work/client/cut.gguf"
[ ! -e "$work/client/cut.gguf" ] || fail "a half-received export was left"
[ -z "$(ls -A "$work/client" | grep staging || true)" ] || fail "staging files were left: $(ls -A "$work/client")"

# Latency: one remote run of 4 tokens through a proxy adding 0, 20 and 100 ms per direction.
for delay in 0 20 100; do
  python3 "$here/remote_proxy.py" "$addr" --delay-ms $delay > "$work/proxy-$delay.port" &
  pids+=($!)
  for _ in $(seq 50); do [ -s "$work/proxy-$delay.port" ] && break; sleep 0.1; done
  start=$(date +%s.%N)
  "$bin" run --remote "127.0.0.1:$(head -1 "$work/proxy-$delay.port")" --token-file "$work/client/token" -m tiny.gguf \
    --tokens 1,2,3 -n 4 > /dev/null
  end=$(date +%s.%N)
  local_start=$(date +%s.%N)
  (cd "$work/root" && "$bin" run -m tiny.gguf --tokens 1,2,3 -n 4 > /dev/null)
  local_end=$(date +%s.%N)
  python3 -c "print(f'latency +$delay ms: remote run {($end - $start) * 1000:.0f} ms, local run {($local_end - $local_start) * 1000:.0f} ms')"
  if [ $# -ge 2 ]; then
    echo -n "latency +$delay ms: session: "
    "$2" "127.0.0.1:$(head -1 "$work/proxy-$delay.port")" "$work/client/token" tiny.gguf 20 || fail "bench_remote failed"
  fi
done

# --- TLS: what a non-loopback --listen always speaks; --tls gives it on loopback, to test here ---
tls=$work/tls
mkdir -p "$tls"
start_tls_server() {
  serve_on "$tls/serve.out" --tls --token-file "$tls/token"
  tls_pid=$served_pid
  tls_addr=$served_addr
}
start_tls_server
sha=$(sed -n 's/^tls-sha256 //p' "$tls/token")
[ ${#sha} = 64 ] || fail "the token file holds no certificate fingerprint: $(cat "$tls/token")"
[ "$(stat -c %a "$tls/token")" = 600 ] || fail "the token file's mode is $(stat -c %a "$tls/token") after the fingerprint was added"
[ "$(stat -c %a "$tls/serve-tls.pem")" = 600 ] || fail "the TLS identity's mode is $(stat -c %a "$tls/serve-tls.pem"), not 600"
grep -q "^tls:     TLS 1.3, certificate $tls/serve-tls.pem, new (sha256 $sha" "$tls/serve.out" || fail "serve does not print its TLS certificate: $(cat "$tls/serve.out")"
cp -p "$tls/token" "$work/client/tls-token"
# Through a proxy that records every byte: the same output as locally; neither the token nor a
# frame's magic crosses in the clear.
python3 "$here/remote_proxy.py" "$tls_addr" --record "$tls/wire.bin" > "$tls/proxy.port" &
pids+=($!)
for _ in $(seq 50); do [ -s "$tls/proxy.port" ] && break; sleep 0.1; done
(cd "$work/client" && "$bin" run --remote "127.0.0.1:$(head -1 "$tls/proxy.port")" --token-file tls-token -m tiny.gguf \
  --tokens 1,2,3 -n 4 > "$work/client/tls-run.txt") || fail "a run over TLS failed"
diff <(grep -v '^time:' "$work/local/run.txt") <(grep -v '^time:' "$work/client/tls-run.txt") || fail "a run over TLS printed something else"
python3 - "$tls/wire.bin" "$(head -1 "$tls/token")" << 'PY' || fail "the TLS connection carried something in the clear"
import sys
data = open(sys.argv[1], "rb").read()
assert len(data) > 1000, f"only {len(data)} bytes were recorded"
assert data[0] == 0x16, "the first byte is not a TLS handshake record"
assert sys.argv[2].encode() not in data, "the token crossed in the clear"
assert b"LSR1" not in data and b"generated" not in data, "a frame crossed in the clear"
PY
# A client whose token file names no certificate: refused, and told why.
head -1 "$tls/token" > "$work/client/plain-token"
chmod 600 "$work/client/plain-token"
expect 3 "speaks TLS only" "$bin" run --remote "$tls_addr" --token-file "$work/client/plain-token" -m tiny.gguf --tokens 1
# A client pinned to another certificate: refused before its token is sent.
sed "s/^tls-sha256 .*/tls-sha256 $(printf '%064d' 0)/" "$tls/token" > "$work/client/wrong-pin"
chmod 600 "$work/client/wrong-pin"
expect 3 "is not the one the token file names" "$bin" run --remote "$tls_addr" --token-file "$work/client/wrong-pin" -m tiny.gguf --tokens 1
# TLS asked of a plain server; plain asked of a non-loopback address (refused before connecting).
expect 3 "TLS handshake with $addr failed" "$bin" run --remote "$addr" --token-file "$work/client/tls-token" -m tiny.gguf --tokens 1
expect 3 "is not a loopback address" "$bin" run --remote 192.0.2.1:7070 --token-file "$work/client/plain-token" -m tiny.gguf --tokens 1
# A restart keeps the identity: the copied token file still works.
kill "$tls_pid"
wait "$tls_pid" 2> /dev/null || true
start_tls_server
grep -q "certificate $tls/serve-tls.pem (sha256 $sha" "$tls/serve.out" || fail "a restarted TLS server made a new identity: $(cat "$tls/serve.out")"
"$bin" run --remote "$tls_addr" --token-file "$work/client/tls-token" -m tiny.gguf --tokens 1,2 -n 1 > /dev/null || fail "the restarted TLS server refused the copied token file"

# The server killed: clients are told nothing listens, and a restarted server serves them.
kill -9 "$server_pid"
wait "$server_pid" 2> /dev/null || true
expect 3 "cannot connect to $addr" "$bin" run "${remote[@]}" -m tiny.gguf --tokens 1
echo "remote_cli: all checks passed"
