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
#    then give_back.
# 3. The reply's files lie read-only under files_at: summary.txt / summary.json (every step:
#    status, wall s, timeout, estimate), device_check.log, results.tar.gz, recordings.tar.gz,
#    store.sqlite.gz, ncu.tar.gz. To commit, from the repo root:
#      tar -xzf $FILES/recordings.tar.gz     # -> tuning_spaces/recordings/<kernel>/*.json.gz
#      tar -xzf $FILES/results.tar.gz benchmarks/results   # -> benchmarks/results/<gpu>-validation-<date>.json
#      mkdir -p /tmp/r && tar -xzf $FILES/results.tar.gz -C /tmp/r   # compare/ tune/ runs/ profiles/ ceilings
#      tar -xzf $FILES/ncu.tar.gz -C tests/data  # -> tests/data/ncu/*.ncu-rep (where tests read them)
#      .venv/bin/workbench tune gemm_int8      # no GPU here: must replay the H200 recording, with a banner
#      git add tuning_spaces/recordings benchmarks/results/<file> tests/data/ncu/<files>
set -uo pipefail
DRY=0
for a in "$@"; do [ "$a" = "--dry-run" ] && DRY=1; done
[ "${DEVICE_CHECK_DRY_RUN:-0}" = 1 ] && DRY=1
export DEVICE_CHECK_T0=${DEVICE_CHECK_T0:-$(date +%s)}
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
export OUT
exec > >(tee "$OUT/device_check.log") 2>&1
PY=${PYTHON:-python3}
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
# the repo first (its source is what is checked), then the carried packages, then the image's
export PYTHONPATH=$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}
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
