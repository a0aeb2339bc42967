#!/usr/bin/env bash
# The CUTLASS baseline's wheels for the lent GPU (issue 45), in two carries of the device tool
# (64 MiB each at most). Run here, in the repo root (needs the network, not the GPU):
#   bash scripts/cutlass_wheels.sh
# It writes .whl-cutlass/ (git-ignored through info/exclude):
#   1/  nvidia-cutlass-operators 0.3.0, nvidia-cutlass-dsl 4.8.1 and its libs-base/libs-core,
#       apache-tvm-ffi (~8.6 MB), the first half of nvidia-cutlass-dsl-libs-cu12 and SHA256SUMS
#   2/  the second half of nvidia-cutlass-dsl-libs-cu12
# The libs wheel (91.7 MB: the DSL's MLIR compiler, a 191 MB shared object, and its runtime)
# is needed: libs-base alone does not import ("No CTK flavor installed"). cu12 is the one
# nvidia-cutlass-dsl requires; it runs on the H200's CUDA 13.0 driver (both .so files link
# nothing but libc, and the DSL takes the newest flavour the driver supports). The GPU image
# has torch, cuda-bindings, networkx, protobuf and typing-extensions already.
# Then, on the device, two calls within 30 s of each other (the machine keeps /tmp while warm),
# and the check (scripts/device_check.sh's header says more):
#   run command="bash scripts/device_check.sh --stage-cutlass 1" carry=[".whl-cutlass/1"]
#   run command="bash scripts/device_check.sh --stage-cutlass 2" carry=[".whl-cutlass/2"]
#   run command="DEVICE_CHECK_ONLY=env,compare_gemm_int8_cutlass,compare_gemm_fp8_cutlass ..."
set -euo pipefail
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qx '/.whl-cutlass/' "$exclude" 2>/dev/null || echo '/.whl-cutlass/' >>"$exclude"
rm -rf .whl-cutlass
mkdir -p .whl-cutlass/all .whl-cutlass/1 .whl-cutlass/2
plat=()
for n in 28 27 24 17; do plat+=(--platform "manylinux_2_${n}_x86_64"); done
plat+=(--platform manylinux2014_x86_64 --platform any)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${plat[@]}" -d .whl-cutlass/all \
  nvidia-cutlass-operators==0.3.0 nvidia-cutlass-dsl==4.8.1 nvidia-cutlass-dsl-libs-base==4.8.1 \
  nvidia-cutlass-dsl-libs-core==4.8.1 nvidia-cutlass-dsl-libs-cu12==4.8.1 \
  apache-tvm-ffi==0.1.15.post2
libs=$(ls .whl-cutlass/all/nvidia_cutlass_dsl_libs_cu12-*.whl)
(cd .whl-cutlass/all && sha256sum "$(basename "$libs")") >.whl-cutlass/1/SHA256SUMS
split -n 2 -d "$libs" ".whl-cutlass/part-"
mv .whl-cutlass/part-00 .whl-cutlass/1/"$(basename "$libs")".part-00
mv .whl-cutlass/part-01 .whl-cutlass/2/"$(basename "$libs")".part-01
find .whl-cutlass/all -name '*.whl' ! -name 'nvidia_cutlass_dsl_libs_cu12-*' -exec mv {} .whl-cutlass/1/ \;
rm -rf .whl-cutlass/all
du -sh .whl-cutlass/1 .whl-cutlass/2
