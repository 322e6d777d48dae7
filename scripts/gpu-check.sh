#!/usr/bin/env bash
# gpu-check.sh: the one prepared check of the CUDA backend on a machine
# with NVIDIA GPUs (CI has none; everything else runs there on a fake
# driver). It prints the devices, then runs backend/cuda's tests on the
# real driver (GLMRUN_CUDA=1): the binding, every kernel against the CPU
# backend (max relative error per kernel), the golden models through the
# CUDA backend at TP=1 and TP=2,4,… up to the GPU count or 4 (more devices
# than GPUs are logical devices sharing them) against the CPU backend and
# llama.cpp's references, decode tokens/s and matvec GB/s;
# then one CLI generation with --backend cuda. A short summary goes to
# $OUT/gpu-check-summary.txt (OUT defaults to .gpu-check/out).
#
#   scripts/gpu-check.sh          run the binaries .gpu-check holds, or
#                                 build them first when there are none
#   scripts/gpu-check.sh build    only build .gpu-check/{cuda.test,glmrun}
#                                 (CGO_ENABLED=0: they need only libc and
#                                 libcuda.so.1), e.g. to carry them to a GPU
#                                 machine, which then need neither Go nor
#                                 a module cache nor a network
#
# Binaries built here are used as they are (a rebuild on a bare GPU machine
# would fetch modules it cannot reach and spend its minutes); a note says
# when they were built from another commit. GPU_CHECK_REBUILD=1 rebuilds.
# GPU_CHECK_TIMEOUT (seconds, default 420) bounds the test run; the whole
# script stays within about that plus a minute. GPU_CHECK_RUN (a -test.run
# pattern, default all) narrows the tests, e.g. for a dry run on the fake
# driver: GLMRUN_LIBCUDA=/path/to/fake/libcuda.so.1 GPU_CHECK_RUN='TestKernels|TestGolden'.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=.gpu-check
export PATH="$PATH:/usr/local/go/bin"

build() {
	mkdir -p "$BIN" &&
		CGO_ENABLED=0 go test -c -o "$BIN/cuda.test" ./backend/cuda &&
		CGO_ENABLED=0 go build -o "$BIN/glmrun" ./cmd/glmrun &&
		{ git rev-parse HEAD 2>/dev/null || echo unknown; } >"$BIN/commit"
}

if [ "${1:-}" = build ]; then
	build
	exit
fi
if [ "${GPU_CHECK_REBUILD:-0}" = 1 ] || [ ! -x "$BIN/cuda.test" ] || [ ! -x "$BIN/glmrun" ]; then
	command -v go >/dev/null 2>&1 || { echo "gpu-check: no $BIN/cuda.test and no Go to build it (run: scripts/gpu-check.sh build)"; exit 1; }
	# Offline: a machine without the module cache fails at once instead of
	# waiting on a proxy it cannot reach.
	GOFLAGS=-mod=mod GOPROXY=${GPU_CHECK_GOPROXY:-off} build || { echo "gpu-check: build failed"; exit 1; }
fi
built=$(cat "$BIN/commit" 2>/dev/null || echo unknown)
if [ "$built" != "$(git rev-parse HEAD 2>/dev/null || echo unknown)" ]; then
	echo "gpu-check: note: $BIN was built from commit $built, not this checkout's HEAD"
fi

OUT=${OUT:-$BIN/out}
mkdir -p "$OUT"
S=$OUT/gpu-check-summary.txt
LOG=$OUT/gpu-check-tests.log
LIMIT=${GPU_CHECK_TIMEOUT:-420}
# The driver's JIT cache in a folder the run can write: the first test
# compiles the PTX, the later steps reuse it.
JIT=$(cd "$OUT" && pwd)/jit-cache
mkdir -p "$JIT"
export CUDA_CACHE_PATH="$JIT"
{
	echo "glmrun gpu-check, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u '+%Y-%m-%d %H:%M UTC')"
	nvidia-smi --query-gpu=index,name,driver_version,compute_cap,memory.total --format=csv,noheader 2>&1 ||
		echo "nvidia-smi failed"
} | tee "$S"
NDEV=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
echo "GPUs: ${NDEV:-0}" | tee -a "$S"

# The tests read ../../testdata relative to their package directory.
(
	cd backend/cuda &&
		GLMRUN_CUDA=1 GLMRUN_CUDA_DEVICES="${NDEV:-1}" CUDA_CACHE_PATH="$JIT" \
			timeout -k 15 "$LIMIT" "../../$BIN/cuda.test" -test.v -test.count=1 -test.timeout "${LIMIT}s" \
				-test.run "${GPU_CHECK_RUN:-.}"
) >"$LOG" 2>&1
rc=$?
echo "tests: exit $rc (log: $LOG)" | tee -a "$S"
# Results: pass/fail lines, device and JIT, per-kernel errors, golden
# models, throughput.
grep -E '^(--- |FAIL|PASS|ok|panic)|    --- FAIL|compute capability|JIT|max relative error|^ {10}[A-Za-z].* [0-9.e+-]+$|logit diff|tokens/s|GB/s|Error|error' "$LOG" |
	grep -v '^=== ' | tee -a "$S"

# The command a user runs.
echo "CLI: glmrun -m glm5-mini.Q8_0 --backend cuda -n 32" | tee -a "$S"
start=$(date +%s.%N)
timeout -k 5 60 "$BIN/glmrun" -m testdata/models/glm5-mini.Q8_0.gguf -p "The capital of France is" -n 32 \
	--temp 0 --backend cuda >"$OUT/cli.out" 2>"$OUT/cli.err"
crc=$?
end=$(date +%s.%N)
echo "  exit $crc in $(echo "$end - $start" | bc 2>/dev/null || echo '?') s; output: $(head -c 200 "$OUT/cli.out" | tr '\n' ' ')" | tee -a "$S"
tail -n 3 "$OUT/cli.err" | sed 's/^/  stderr: /' | tee -a "$S"
# Layer by layer: the same prompt dumped on the CPU and on the GPU, then
# glmrun diff names the first tensor that differs (if any).
echo "diff: glmrun dump --backend cpu vs --backend cuda (glm5-mini.Q8_0, P1 text)" | tee -a "$S"
for b in cpu cuda; do
	timeout -k 5 60 "$BIN/glmrun" dump -m testdata/models/glm5-mini.Q8_0.gguf --text "The capital of France is" \
		--backend $b -o "$OUT/dump-$b" >/dev/null 2>"$OUT/dump-$b.err" || tail -n 2 "$OUT/dump-$b.err" | tee -a "$S"
done
timeout -k 5 60 "$BIN/glmrun" diff "$OUT/dump-cpu" "$OUT/dump-cuda" >"$OUT/diff.out" 2>&1
drc=$?
tail -n 1 "$OUT/diff.out" | sed 's/^/  /' | tee -a "$S"

# Throughput: a small synthetic GLM-4.7-Flash (2 blocks, Q4_K_M) through
# glmrun bench on the GPU and, for scale, on the CPU.
echo "bench: synthetic GLM-4.7-Flash shape, 2 blocks, Q4_K_M: pp512 and tg64, cuda then cpu" | tee -a "$S"
timeout -k 5 120 "$BIN/glmrun" synth -layers 2 -o "$OUT/flash2.gguf" --tokenizer testdata/models/glm5-mini.Q8_0.gguf \
	>"$OUT/synth.out" 2>&1 || tail -n 2 "$OUT/synth.out" | sed 's/^/  /' | tee -a "$S"
brc=0
for b in cuda cpu; do
	timeout -k 5 120 "$BIN/glmrun" bench -m "$OUT/flash2.gguf" --backend $b -p 512 -n 64 -r 2 \
		>"$OUT/bench-$b.out" 2>&1 || brc=1
	grep -E '^\| .*(pp|tg)[0-9]' "$OUT/bench-$b.out" | sed "s/^/  $b /" | tee -a "$S"
	tail -n 1 "$OUT/bench-$b.out" | sed "s/^/  $b: /" | tee -a "$S"
done
# The same decode without CUDA graphs (one driver launch per kernel), to
# see what graphs gain.
timeout -k 5 60 env GLMRUN_CUDA_GRAPHS=0 "$BIN/glmrun" bench -m "$OUT/flash2.gguf" --backend cuda -p 0 -n 64 -r 2 \
	>"$OUT/bench-cuda-nographs.out" 2>&1 || brc=1
grep -E '^\| .*tg[0-9]' "$OUT/bench-cuda-nographs.out" | sed "s/^/  cuda, graphs off /" | tee -a "$S"
# Tensor parallelism on the GPUs there are: TP 2 and 4 (logical devices
# where the GPUs are fewer).
for tp in 2 4; do
	timeout -k 5 60 "$BIN/glmrun" bench -m "$OUT/flash2.gguf" --backend cuda --tp $tp -p 512 -n 64 -r 1 \
		>"$OUT/bench-cuda-tp$tp.out" 2>&1 || brc=1
	grep -E '^\| .*(pp|tg)[0-9]' "$OUT/bench-cuda-tp$tp.out" | sed "s/^/  cuda tp $tp /" | tee -a "$S"
	tail -n 1 "$OUT/bench-cuda-tp$tp.out" | sed "s/^/  cuda tp $tp: /" | tee -a "$S"
done
[ $rc -eq 0 ] && [ $crc -eq 0 ] && [ $drc -eq 0 ] && [ $brc -eq 0 ]
