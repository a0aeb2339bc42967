#!/usr/bin/env bash
# The one script for a lent H200 (issue 8): ~8 minutes, everything under $OUT.
#
# 1. Here, before the call (repo root; needs the network, not the GPU): the wheels the GPU image
#    lacks, 15 files, 38.7 MiB (measured 2026-11-30; the tree itself is ~1.8 MB, the carry
#    limit 64 MiB):
#      ../shared/tools/device-wheels.sh optuna==5.0.0 alembic==1.20.1 colorlog==6.12.0 \
#        Mako==1.4.3 sqlalchemy==2.1.9 plotly==7.1.0 nvtx==0.2.17 pydantic==2.14.4 \
#        pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
#        typing-extensions==4.16.0 pyelftools==0.33 ruptures==1.1.10
#      python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
#        --implementation cp --platform manylinux_2_25_x86_64 -d .whl ncu-report==2026.3.1
#    (device-wheels.sh also builds workbench-*.whl: this script does not install it, the repo's
#    own source is used.) Check: du -sh .whl  (must stay under ~60 MiB with the tree)
#    Rehearse on the CPU:  bash scripts/device_check.sh --dry-run   (OUT=/tmp/x to choose)
# 2. The device tool (one call of 8 minutes: the steps' estimates, H200 wall times of
#    2026-12-04, sum to ~415 s; no step starts after 430 s, every step ends by 450 s, the
#    export and packing by ~475 s):
#      run  command="bash scripts/device_check.sh"  carry=[".whl"]  timeout_s=480
#    A rerun of some steps only (names: python3 scripts/device_check.py --list; the steps
#    marked "on request" run only so: the tunes and ncu profiles whose H200 results are
#    committed; an ncu profile needs profile_reduce, the counter probe, before it), at once
#    while the machine is warm (30 s):
#      run  command="DEVICE_CHECK_ONLY=env,profile_reduce,profile_aos_soa_aos,profile_aos_soa_soa \
#            DEVICE_CHECK_HARD_S=200 DEVICE_CHECK_SOFT_S=170 bash scripts/device_check.sh"
#    then give_back. The TMA paths' staged epilogue (issue 54, EPILOGUE=tma) is verified at
#    the odd and compare shapes on request only (~174 s estimated, over a plain run's budget):
#      run  command="DEVICE_CHECK_ONLY=env,pytest_tma_epilogue DEVICE_CHECK_HARD_S=300 \
#            DEVICE_CHECK_SOFT_S=270 bash scripts/device_check.sh"  carry=[".whl"]  timeout_s=360
# 3. The reply's files lie read-only under files_at: summary.txt / summary.json (every step:
#    status, wall s, timeout, estimate), device_check.log, results.tar.gz, recordings.tar.gz,
#    store.sqlite.gz, ncu.tar.gz. To commit, from the repo root:
#      tar -xzf $FILES/recordings.tar.gz     # -> tuning_spaces/recordings/<kernel>/*.json.gz
#      tar -xzf $FILES/results.tar.gz benchmarks/results   # -> benchmarks/results/<gpu>-validation-<date>.json
#      mkdir -p /tmp/r && tar -xzf $FILES/results.tar.gz -C /tmp/r   # compare/ tune/ runs/ profiles/ ceilings
#      tar -xzf $FILES/ncu.tar.gz -C tests/data  # -> tests/data/ncu/*.ncu-rep (where tests read them)
#      # what a no-GPU tune of K stores with its recording (docs/tuning.md), kept beside it:
#      # /tmp/r/compare/K.json -> tuning_spaces/recordings/K/compare/K-<gpu>-<date>.json,
#      # /tmp/r/profiles/K_*.json -> .../K/profiles/K-<gpu>-<date>.json and the reports they
#      # name -> .../K/ncu/ (git mv from tests/data/ncu: tests read them there too)
#      .venv/bin/workbench tune gemm_int8      # no GPU here: must replay the H200 recording, with a banner
#      git add tuning_spaces/recordings benchmarks/results/<file> tests/data/ncu/<files>
#
# CUTLASS (issue 45): its wheels (~100 MB) exceed one carry. scripts/cutlass_wheels.sh splits
# them in .whl-cutlass/1 and .whl-cutlass/2; two calls, each within 30 s of the last, stage them
# under /tmp (kept while the machine is warm); the second joins, checks and installs them into
# /tmp/site-cutlass and lists the sm_90a operators (seconds each):
#      run  command="bash scripts/device_check.sh --stage-cutlass 1"  carry=[".whl-cutlass/1"]
#      run  command="bash scripts/device_check.sh --stage-cutlass 2"  carry=[".whl-cutlass/2"]
#    then, at once, the CUTLASS comparisons (on request: ~265 s each, estimated; together over
#    the plain run's 430 s, so with the deadlines raised, in one call of up to 10 minutes):
#      run  command="DEVICE_CHECK_ONLY=env,compare_gemm_int8_cutlass,compare_gemm_fp8_cutlass \
#            DEVICE_CHECK_SOFT_S=560 DEVICE_CHECK_HARD_S=570 bash scripts/device_check.sh" \
#           carry=[".whl"]  timeout_s=600
#    (one of the two alone fits the plain deadlines.) Every later call of this script puts
#    /tmp/site-cutlass on the path when it is there.
#
# gemm_w4a16 (issue 55, never run on a GPU): its steps are on request; by their estimates the
# gpu tests take ~250 s and the tunes and comparisons ~240 s, so two calls of the plain deadlines:
#      run  command="DEVICE_CHECK_ONLY=env,pytest_w4a16 bash scripts/device_check.sh"  carry=[".whl"]
#      run  command="DEVICE_CHECK_ONLY=env,ceilings,tune_gemm_w4a16_m1,tune_gemm_w4a16_m16,\
#            tune_gemm_w4a16_m2048,compare_gemm_w4a16,compare_gemm_w4a16_bf16 \
#            bash scripts/device_check.sh"  carry=[".whl"]
#
# attention_decode (issue 56, never run on a GPU): on request too, in two calls:
#      run  command="DEVICE_CHECK_ONLY=env,pytest_attention bash scripts/device_check.sh"  carry=[".whl"]
#      run  command="DEVICE_CHECK_ONLY=env,ceilings,tune_attention_decode_b32,tune_attention_decode_b1,\
#            tune_attention_decode_fp16_b32,tune_attention_decode_fp16_b1,compare_attention_decode \
#            bash scripts/device_check.sh"  carry=[".whl"]
set -uo pipefail
DRY=0
STAGE=""
prev=""
for a in "$@"; do
  [ "$a" = "--dry-run" ] && DRY=1
  [ "$prev" = "--stage-cutlass" ] && STAGE=$a
  prev=$a
done
[ "${DEVICE_CHECK_DRY_RUN:-0}" = 1 ] && DRY=1
PY=${PYTHON:-python3}
CUTLASS_PARTS=${CUTLASS_PARTS:-/tmp/wb-cutlass-parts}
CUTLASS_SITE=${CUTLASS_SITE:-/tmp/site-cutlass}
# the DSL's packages first: its .pth (which --target installs do not run) puts them first too
CUTLASS_PATH="$CUTLASS_SITE/nvidia_cutlass_dsl/dsl_packages:$CUTLASS_SITE"
if [ -n "$STAGE" ]; then
  # one carry of CUTLASS's wheels: keep it; with both halves here, join, check and install
  [ -d ".whl-cutlass/$STAGE" ] || { echo "ERROR: .whl-cutlass/$STAGE was not carried"; exit 2; }
  mkdir -p "$CUTLASS_PARTS" && cp .whl-cutlass/"$STAGE"/* "$CUTLASS_PARTS"/ || exit 2
  echo "staged .whl-cutlass/$STAGE: $(ls "$CUTLASS_PARTS" | tr '\n' ' ')"
  cd "$CUTLASS_PARTS" || exit 2
  parts=(*.part-*)
  if [ ! -f SHA256SUMS ] || [ "${#parts[@]}" -lt 2 ] || [ ! -f "${parts[0]}" ]; then
    echo "waiting for the other half (the next call, within 30 s)"
    exit 0
  fi
  libs=${parts[0]%.part-*}
  cat "${parts[@]}" >"$libs" && sha256sum -c SHA256SUMS || { echo "ERROR: join failed"; exit 3; }
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$CUTLASS_SITE" ./*.whl || { echo "ERROR: CUTLASS wheel install failed"; exit 3; }
  cd - >/dev/null || exit 2
  # (torch and the API only: the base wheels may not be installed yet on a fresh machine)
  PYTHONPATH=$CUTLASS_PATH${PYTHONPATH:+:$PYTHONPATH} $PY -c '
import importlib.metadata as md, torch, cutlass, cutlass.operators as ops
def meta(*shape, dtype):
    return torch.empty(shape, dtype=dtype, device="meta")
a, b, c = meta(64, 64, dtype=torch.int8), meta(64, 64, dtype=torch.int8), meta(64, 64, dtype=torch.int32)
args = ops.GemmArguments(a, b.t(), c, accumulator_type=cutlass.Int32)
print("nvidia-cutlass-operators", md.version("nvidia-cutlass-operators"), "| nvidia-cutlass-dsl",
      md.version("nvidia-cutlass-dsl"), "|", len(ops.get_operators(args, target_sm="90a")),
      "int8 operators for sm_90a")
' || { echo "ERROR: the CUTLASS Operator API does not import from $CUTLASS_SITE"; exit 3; }
  exit 0
fi
export DEVICE_CHECK_T0=${DEVICE_CHECK_T0:-$(date +%s)}
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
export OUT
exec > >(tee "$OUT/device_check.log") 2>&1
echo "device_check.sh: $(date -u +%FT%TZ) dry_run=$DRY out=$OUT"

if [ "$DRY" = 0 ]; then
  t=$SECONDS
  # the carried wheels (not the project's own wheel: the repo's source is used)
  mapfile -t WHEELS < <(ls .whl/*.whl 2>/dev/null | grep -v '/workbench-')
  if [ "${#WHEELS[@]}" -gt 0 ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site "${WHEELS[@]}" || { echo "ERROR: wheel install failed"; exit 3; }
  else
    echo "WARNING: no .whl/*.whl carried: optuna, sqlalchemy, pydantic... will be missing"
  fi
  echo "wheel install: ${#WHEELS[@]} wheels in $((SECONDS - t)) s"
fi
# the repo first (its source is what is checked), then the carried packages (CUTLASS's when
# staged), then the image's
EXTRA_PATH=""
[ -d "$CUTLASS_SITE" ] && EXTRA_PATH=":$CUTLASS_PATH"
export PYTHONPATH=$PWD:/tmp/site$EXTRA_PATH${PYTHONPATH:+:$PYTHONPATH}
# the image's CUDA (nvdisasm, cuobjdump, ptxas, headers) where cuda-pathfinder looks for it
if [ -z "${CUDA_HOME:-}" ] && [ -d /usr/local/cuda ]; then export CUDA_HOME=/usr/local/cuda; fi
export PYTHON=$PY PYTHONUNBUFFERED=1
ARGS=()
[ "$DRY" = 1 ] && ARGS+=(--dry-run)
$PY scripts/device_check.py ${ARGS[@]+"${ARGS[@]}"}
rc=$?
ls -la "$OUT"
exec >&- 2>&-  # close the pipe to tee and let it write the log's tail before the exit
wait
exit $rc
