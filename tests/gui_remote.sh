#!/bin/bash
# The real window on a session served by `layerscope serve`, through a proxy standing for the
# network: it connects (--connect), steps and continues against a reference on the server's disk
# (clean to the end), draws the attention panel from a fetched kq_soft_max; when the network is
# cut it stays up saying so, with what it fetched, and when the network is back it takes up the
# same session and steps on; every panel draws on the model's header the server sent (its weights
# stay there) and the logit lens is worked out there; a reference outside the server's folders is
# refused by name. Then, on a second model: a reference on this machine is uploaded and compared on
# the server, the doctor's verdict, the local errors and the lens come from there, and the export
# panel writes every event
# on the server's disk and here (fetched). Then, on a third: a weight's bytes fetched for the weight
# inspector, a fault, a backend A/B and the same model's F16 file run by the server.
# usage: gui_remote.sh LAYERSCOPE_BINARY FIXTURES_DIR
set -eu
binary=$1 fixtures=$2
here=$(cd "$(dirname "$0")" && pwd)
[ -f "$fixtures/models/stories260K.gguf" ] || { echo "SKIP: $fixtures not found"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/layerscope-gui-remote.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  wait 2> /dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  echo "---- state log:"; cat "$dir/log" 2> /dev/null || true
  echo "---- server log:"; cat "$dir/serve.log" 2> /dev/null || true
  exit 1
}
export XDG_CONFIG_HOME=$dir/config
mkdir -p "$dir/srv" "$dir/here"
"$binary" serve --listen 127.0.0.1:0 --root "$fixtures" --root "$dir/srv" > "$dir/serve.out" 2> "$dir/serve.log" &
pids+=($!)
for _ in $(seq 100); do grep -q "listening on" "$dir/serve.out" 2> /dev/null && break; sleep 0.1; done
addr=$(sed -n 's/^layerscope serve: listening on //p' "$dir/serve.out")
[ -n "$addr" ] || fail "the server did not start"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
start_proxy() {
  python3 "$here/remote_proxy.py" "$addr" --port "$port" > "$dir/proxy.port" &
  proxy=$!
  pids+=($proxy)
  for _ in $(seq 50); do [ -s "$dir/proxy.port" ] && break; sleep 0.1; done
}
start_proxy

# served_gui MODEL N: the window on MODEL, served directly, running $dir/scriptN into $dir/logN
# (then also $dir/log, for fail()).
served_gui() {
  xvfb-run -a -s "-screen 0 1280x800x24" "$binary" --connect "$addr" --token-file "$XDG_CONFIG_HOME/layerscope/serve-token" \
    "$1" --backend cpu --script "$dir/script$2" --state-log "$dir/log$2" ||
    { cp "$dir/log$2" "$dir/log"; fail "GUI $2 exited with $?"; }
  cat "$dir/log$2"
  cp "$dir/log$2" "$dir/log"
}

cat > "$dir/script" << END
wait
key F10
key F10
wait
key F5
wait
select kq_soft_max-0
panel attention on
frames 20
screenshot $dir/attention.png
panels all
frames 20
zoom lens
frames 100
zoom off
log cut the network
frames 1500
prompt Once upon a time there was
wait
key F10
wait
frames 5
log stepped after the reconnect
reference server:/etc/passwd
frames 60
quit
END
xvfb-run -a -s "-screen 0 1280x800x24" "$binary" --connect "127.0.0.1:$port" \
  --token-file "$XDG_CONFIG_HOME/layerscope/serve-token" "models/stories260K.gguf" \
  -r "dumps/stories260K_once_n0_fa-off.gguf" --backend cpu --script "$dir/script" --state-log "$dir/log" &
gui=$!
pids+=($gui)
wait_log() {  # wait_log PATTERN: up to 60 s for it in the state log
  for _ in $(seq 600); do grep -q -- "$1" "$dir/log" 2> /dev/null && return 0; sleep 0.1; done
  fail "no '$1' in the state log"
}
wait_log "note cut the network"
kill "$proxy"
wait "$proxy" 2> /dev/null || true
wait_log "remote lost"
sleep 1
start_proxy
wait_log "stepped after the reconnect"
wait "$gui" || fail "the GUI exited with $?"
cat "$dir/log"
grep -q "^remote connected 127.0.0.1:$port session 1$" "$dir/log" || fail "the GUI did not connect"
grep -q "^state finished cursor [0-9]* .* first_divergent -1$" "$dir/log" || fail "the remote run did not finish clean"
# The model's header came with the session: the panels read its config, vocabulary and tensor
# table here (every panel was drawn on it), its weights stay on the server.
grep -q "^remote model 127.0.0.1:$port:models/stories260K.gguf: llama, [0-9]* tensors, 512 tokens, header [0-9]* bytes, weights on the server$" "$dir/log" ||
  fail "no model header from the server"
# The logit lens, worked out on the server (the output head's weights are there): clean.
grep -q "^lens: 5 layers x [0-9]* positions, first layer that differs -1, first top-1 change -1 (worked out on the server)$" "$dir/log" ||
  fail "no logit lens from the server"
[ "$(grep -c "^remote connected" "$dir/log")" -ge 2 ] || fail "the GUI did not reconnect"
grep -q "session 1 attached (the client holds the model's header: not sent again)" "$dir/serve.log" ||
  fail "the server did not see the same session taken up, without sending the model's header again"
awk '/^remote connected/ { n++ } n >= 2 && /^state paused cursor 0 / { found = 1 } END { exit !found }' "$dir/log" ||
  fail "no step after the reconnect"
test -s "$dir/attention.png" || fail "no screenshot"
grep -q "^error /etc/passwd is outside the folders this server reads" "$dir/log" ||
  fail "a reference outside the server's folders was not refused by name"

# A reference here (a copy outside the server's folders): uploaded, then the F16 model's run on the
# server diverges from its Q4_K_M run; the doctor and the local errors are the server's; exports.
cp "$fixtures/dumps/llama-gqa-mini-Q4_K_M_lily_n0_nocache.gguf" "$dir/here/lily-q4.gguf"
cat > "$dir/script2" << END
wait
reference $dir/here/lily-q4.gguf
wait
key F5
wait
panel divergence on
select Qcur-0
panel tensor on
panel attention on
frames 20
screenshot $dir/uploaded.png
zoom lens
frames 100
zoom off
wait
export server $dir/srv/lily.gguf
wait
export here $dir/here/lily-npy
wait
quit
END
served_gui models/llama-gqa-mini-F16.gguf 2
grep -q "^reference uploaded $dir/here/lily-q4.gguf as upload:lily-q4.gguf$" "$dir/log2" || fail "the reference was not uploaded"
grep -q "uploaded lily-q4.gguf" "$dir/serve.log" || fail "the server did not take the upload"
grep -q "^reference here $dir/here/lily-q4.gguf ([0-9]* tensors) for the panels' reference side$" "$dir/log2" ||
  fail "the uploaded reference was not opened here for the panels"
grep -q "^state finished cursor [0-9]* .* first_divergent 0$" "$dir/log2" || fail "the run did not diverge at the first event"
grep -q "^doctor no known transform explains it$" "$dir/log2" || fail "no doctor's verdict from the server"
grep -q "^lens: [0-9]* layers x [0-9]* positions, first layer that differs [0-9][0-9]*, first top-1 change -\?[0-9]* (worked out on the server)$" "$dir/log2" ||
  fail "no logit lens of the diverged run from the server"
grep -q "^export: Wrote [0-9]* tensors .* to $dir/srv/lily.gguf on the server$" "$dir/log2" || fail "no export on the server's disk"
grep -q "^export: Wrote [0-9]* tensors .* to $dir/here/lily-npy, fetched from the server$" "$dir/log2" || fail "no export here"
"$binary" inspect "$dir/srv/lily.gguf" > /dev/null || fail "the server's export does not read back"
test -s "$dir/here/lily-npy/manifest.json" || fail "the export here has no manifest"
test -s "$dir/here/lily-q4.gguf" || fail "the uploaded file is gone from here"
test -s "$dir/uploaded.png" || fail "no screenshot of the panels on the uploaded reference"
# A selected event stays selected when its tensor arrives from the server.
awk '/^select 3 Qcur-0$/ { on = 1 } on && /^state / { last = $0 } /^script screenshot/ { if (on) exit } END { exit !(last ~ / cursor 3 Qcur-0 /) }' "$dir/log2" ||
  fail "the selection went back to the session's cursor when its tensor came"
# A weight's bytes fetched for the weight inspector, a fault and a backend A/B run on the server.
cat > "$dir/script3" << END
wait
weight blk.0.attn_q.weight
wait
frames 5
fault rope-pairing
wait
key F5
wait
against cpu
wait
key F5
wait
fault none
wait
key F5
wait
against-model models/llama-gqa-mini-F16.gguf
wait
key F5
wait
quit
END
served_gui models/llama-gqa-mini-Q4_K_M.gguf 3
# The weight's values are the local file's: as many, and the same rms as `inspect` prints here.
local_rms=$("$binary" inspect "$fixtures/models/llama-gqa-mini-Q4_K_M.gguf" --tensor blk.0.attn_q.weight --json |
  python3 -c 'import json, sys; s = json.load(sys.stdin)["tensor"]["stats"]; print("%d %.6g" % (s["n"], s["rms"]))')
grep -q "^weight blk.0.attn_q.weight: ${local_rms% *} values, [0-9]* bytes fetched from the server, rms ${local_rms#* }$" "$dir/log3" ||
  fail "the weight inspector did not show the server's bytes of blk.0.attn_q.weight (here: $local_rms)"
grep -q "^fault rope-pairing on the server: the session runs again with the rope-pairing fault$" "$dir/log3" ||
  fail "the server did not re-run with the fault"
grep -q "^backend A/B against cpu on the server: the cpu backend's run (CPU.*) is the reference$" "$dir/log3" ||
  fail "the server did not compare with its cpu run"
grep -q "^fault none on the server: the session runs again without a fault$" "$dir/log3" || fail "the fault was not cleared"
grep -q "^comparison against models/llama-gqa-mini-F16.gguf on the server: the run of models/llama-gqa-mini-F16.gguf (the same model: .*) is the reference$" "$dir/log3" ||
  fail "the server did not compare with its run of the F16 file"
# Faulted against the clean cpu run: diverged; without the fault: clean.
finished=$(grep "^state finished" "$dir/log3" | sed 's/.* first_divergent //' | tr '\n' ' ')
case "$finished" in
  "-1 "[0-9]*" -1 "*" ") ;;
  *) fail "the runs ended with first_divergent $finished (expected -1, then >= 0 against the cpu run, then -1, then the F16 run's)" ;;
esac
echo "PASS: connected, clean to the end against the server's reference, survived a network cut and reconnected;"
echo "      an uploaded reference compared on the server, its doctor's verdict and logit lens shown here, exported there and here;"
echo "      a weight's bytes fetched for the inspector, a fault, a backend A/B and another format run on the server"
