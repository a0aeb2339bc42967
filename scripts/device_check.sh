#!/usr/bin/env bash
# The one script for a lent GPU (issue 8). Run from the repository root on the device machine:
#   device tool: run, carry [".whl"], command "bash scripts/device_check.sh"
# Prepare the wheels here first:
#   ../shared/tools/device-wheels.sh optuna==5.0.0 alembic colorlog Mako sqlalchemy==2.1.9 \
#       greenlet plotly==7.1.0 narwhals nvtx pydantic pydantic-core annotated-types \
#       typing-inspection pyelftools
# Everything it makes goes under $OUT (at most 8 files come back, two folders deep): a log, the
# environment and ceilings, the GPU test log, recordings and a store, packed in one tarball.
set -uo pipefail
OUT=${OUT:-$PWD/device-out}
WORK=/tmp/wb-device
mkdir -p "$OUT" "$WORK/rec"
exec > >(tee "$OUT/device_check.log") 2>&1
step() { echo; echo "=== $(date -u +%T) $*"; }

step "install carried wheels"
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || echo "wheel install failed"
fi
export PYTHONPATH=/tmp/site:$PWD
export WORKBENCH_CACHE_DIR=$WORK/cache WORKBENCH_STORE=$WORK/store.sqlite PYTHONUNBUFFERED=1
WB="python3 -m workbench.cli.main"

step "environment"
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,clocks.sm,clocks.mem,memory.total \
  --format=csv | tee "$WORK/gpu.csv"
python3 -c "import workbench.gpu as g; print(g.probe_gpu())"
python3 -c "from workbench.toolchain import nvrtc_version, find_tool; print('nvrtc', nvrtc_version()); print(find_tool('ptxas'), find_tool('nvdisasm'))"

step "ceilings (copy bandwidth, int8 and fp16 matmul through torch)"
timeout 120 python3 scripts/ceilings.py --json "$WORK/ceilings.json"

step "gpu tests"
timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider tests/ 2>&1 | tail -40 | tee "$WORK/gpu_tests.log"

step "recordings (sampled sweeps) of the library"
for spec in "reduce --sample 24" "stream_scale --all" "gemm_int8 --sample 16" "cache_hints --sample 12" \
            "aos_soa --sample 12" "divergence --all"; do
  set -- $spec
  timeout 90 $WB record "$@" -o "$WORK/rec/$1-h200.json.gz" || echo "record $1 failed ($?)"
done

step "short tunes"
timeout 120 $WB tune gemm_int8 --shapes llm_decode --budget 12 --json > "$WORK/tune_gemm_int8.json"
timeout 60 $WB tune reduce --budget 20 --json > "$WORK/tune_reduce.json"
$WB store list

step "profile (ncu) and compare (issue 5)"
# ncu on the first kernel doubles as the counter check: its JSON says source "ncu", or
# "event-timing" with the reason (ERR_NVGPUCTRPERM, no ncu...), and the rest then fall back too.
CEIL=(); [ -s "$WORK/ceilings.json" ] && CEIL=(--ceilings "$WORK/ceilings.json")
mkdir -p "$WORK/ncu" "$WORK/profiles"
command -v ncu && ncu --version | tail -1
start=$SECONDS
for spec in "reduce --config best --set full" "gemm_int8 --set full" \
            "divergence -c VARIANT=branchy --set divergence" "divergence -c VARIANT=masked --set divergence" \
            "aos_soa -c LAYOUT=aos --set memory" "aos_soa -c LAYOUT=soa --set memory"; do
  if (( SECONDS - start > 240 )); then echo "profile budget spent: skipping $spec"; continue; fi
  set -- $spec
  name=$(echo "$spec" | tr -c 'A-Za-z0-9_\n' '_' | cut -c1-60)
  timeout 90 $WB profile "$@" --report-dir "$WORK/ncu" ${CEIL[@]+"${CEIL[@]}"} --json \
    > "$WORK/profiles/$name.json" || echo "profile $spec failed ($?)"
  grep -m1 -o '"source": "[a-z-]*"' "$WORK/profiles/$name.json" || true
done
timeout 240 $WB compare gemm_int8 --shapes compare ${CEIL[@]+"${CEIL[@]}"} --json > "$WORK/compare_gemm_int8.json" \
  || echo "compare gemm_int8 failed ($?)"
timeout 60 $WB compare reduce ${CEIL[@]+"${CEIL[@]}"} 2>&1 | tail -20 || echo "compare reduce failed"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); [print(s['label'], r['name'], r['status'], r['median_ms'], r['throughput'], r['speedup'], r['reason'][:80]) for s in d['shapes'] for r in s['results']]" \
  "$WORK/compare_gemm_int8.json" || true

step "pack results"
tar -C "$WORK" -czf "$OUT/results.tar.gz" --exclude cache .
ls -la "$OUT"
