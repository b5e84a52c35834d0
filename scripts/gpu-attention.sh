#!/usr/bin/env bash
# One slice of issue 14 on the GPU machine, in one device call: tune kernels/attention-helion
# with `kernel-builder tune` (a few shapes, quick effort first), build the tree with
# `kernel-builder build-and-copy --nix never`, and measure it with bench/attention_h200.py
# (loaded through kernels.get_local_kernel, against SDPA FLASH, cuDNN and default dispatch).
#
#   scripts/gpu-attention.sh prepare [STAGE]   here: build a static kernel-builder, fetch the
#                                              wheels, stage the kernel, the bench and this
#                                              script in STAGE (default: target/gpu-attention of
#                                              this checkout; it must be ignored by git in the
#                                              checkout that carries it to the GPU machine) and
#                                              print the device call.
#   bash STAGE/scripts/gpu-attention.sh device there: install the wheels into /tmp/site, tune,
#                                              build, measure; results to $OUT.
#
# Knobs for the device half (environment):
#   TUNE_SHAPES    bench.py --shapes for the tune ("0-3"; empty: no tuning, measure the staged
#                  heuristic as it is)
#   EFFORT         quick | full (default quick)
#   BUDGET         HELION_AUTOTUNE_BUDGET_SECONDS, the search time per shape (default 90; under
#                  about 60 the initial population is not even benchmarked: NoConfigFound)
#   MAX_CONFIGS    tune --max-configs (default 4)
#   TUNE_FLAGS     more `tune` flags, split on spaces (`--retune`: search TUNE_SHAPES again
#                  though the records have them, keeping the other shapes' records)
#   TUNE_TIMEOUT   seconds before the tune is stopped (SIGINT; default 400: two shapes plus the
#                  measure, build and table phases took over 290 s on the H200)
#   BENCH          0: build the tree but do not run attention_h200.py (tune and bench in separate
#                  device calls: a bench right after a tune measured small shapes slower)
#   BENCH_SHAPES   attention_h200.py --shapes (default all)
#   BENCH_DEADLINE seconds after which attention_h200.py starts no new shape (default 150)
#   REPEATS        timed calls per implementation and shape (default 30)
#   HELION_AUTOTUNE_COMPILE_TIMEOUT (Helion's own) seconds per config compile: give 40 on a
#                  freshly started machine; at 20, 7 of the 9 seed configs of slice 8a's first
#                  shape timed out while the spawned compilers all imported torch at once
#   COLD_START     1: also run bench/attention_cold_start.py (get_local_kernel to first result,
#                  shipped heuristic against autotuning on the first call) into cold-start.json
#   DO_BENCH       1: also run bench/attention_do_bench.py (the same shapes timed with
#                  triton.testing.do_bench, the field's usual harness) into do-bench.json
#
# What comes back under $OUT (at most 8 files, the device tool's limit): env.txt, tune.log,
# the heuristic _helion_aot_attention_cuda_sm90.py, tuning.tar.gz (tuning/cuda_sm90/ with
# tune.json), attention-h200.json, bench.log, cold-start.json, do-bench.json.
set -euo pipefail

prepare() {
  local root stage kb
  root=$(cd "$(dirname "$0")/.." && pwd)
  stage=${1:-$root/target/gpu-attention}
  (cd "$root" && RUSTFLAGS='-C target-feature=+crt-static' \
    cargo build --release --target x86_64-unknown-linux-gnu)
  kb=$root/target/x86_64-unknown-linux-gnu/release/kernel-builder
  file "$kb" | grep -qE 'statically linked|static-pie linked' || { echo "gpu-attention: $kb is not static" >&2; exit 1; }
  mkdir -p "$stage"
  stage=$(cd "$stage" && pwd)
  local top
  top=$(git -C "$stage" rev-parse --show-toplevel)
  git -C "$top" check-ignore -q "$stage" \
    || { echo "gpu-attention: $stage must be ignored by git in $top (it is carried)" >&2; exit 1; }
  rm -rf "$stage"/{bin,kernels,bench,scripts}
  mkdir -p "$stage"/{bin,kernels,bench,scripts,.whl}
  cp "$kb" "$stage/bin/kernel-builder"
  cp -r "$root/kernels/attention-helion" "$stage/kernels/"
  rm -rf "$stage/kernels/attention-helion/build"
  cp "$root/bench/attention_h200.py" "$root/bench/attention_cold_start.py" "$root/bench/attention_cached_check.py" \
    "$root/bench/attention_overhead.py" "$root/bench/attention_do_bench.py" "$stage/bench/"
  cp "$root/scripts/gpu-attention.sh" "$stage/scripts/"
  if ! compgen -G "$stage/.whl/helion-1.4.0-*.whl" >/dev/null; then
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
      --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 -d "$stage/.whl" \
      helion==1.4.0 filecheck==1.0.6 kernels==0.17.2 tomlkit==0.15.2
  fi
  (cd "$stage" && find . -type f | sort && du -sh .)
  echo
  echo "gpu-attention: staged. Device call (from $top):"
  echo "  run(command=\"TUNE_SHAPES=0-3 bash ${stage#"$top"/}/scripts/gpu-attention.sh device\","
  echo "      carry=[\"${stage#"$top"/}\"], timeout_s=480)"
}

device() {
  local stage out kb work rc=0
  stage=$(cd "$(dirname "$0")/.." && pwd)
  out=${OUT:-$stage/out}
  mkdir -p "$out"
  local t0=$SECONDS
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$stage"/.whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  export HELION_AUTOTUNE_BENCHMARK_SUBPROCESS=0 PYTHONUNBUFFERED=1
  export HELION_AOT_DATA_DIR=/tmp/helion-aot-eval
  kb=$stage/bin/kernel-builder
  {
    echo "== date"; date -u
    echo "== nvidia-smi"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv || true
    echo "== kernel-builder"; "$kb" --version
    python3 -c 'import importlib.metadata as m; print({n: m.version(n) for n in ("torch","triton","helion","kernels")})'
  } >"$out/env.txt" 2>&1
  cat "$out/env.txt"

  # Work on a copy: the staged tree stays as it came.
  work=/tmp/attention-helion
  rm -rf "$work"
  cp -r "$stage/kernels/attention-helion" "$work"

  if [ -n "${TUNE_SHAPES:-}" ]; then
    echo "== tune (shapes ${TUNE_SHAPES}, effort ${EFFORT:-quick}, budget ${BUDGET:-90} s/shape)"
    set +e
    HELION_AUTOTUNE_BUDGET_SECONDS=${BUDGET:-90} timeout -s INT "${TUNE_TIMEOUT:-400}" \
      "$kb" tune "$work" --effort "${EFFORT:-quick}" --max-configs "${MAX_CONFIGS:-4}" \
      ${TUNE_FLAGS:-} -- --shapes "$TUNE_SHAPES" >"$out/tune.log" 2>&1
    rc=$?
    set -e
    echo "tune exit status $rc after $((SECONDS - t0)) s"
    grep -v '^\[' "$out/tune.log" | tail -40 || true
    cp "$work"/torch-ext/attention_helion/_helion_aot_attention_*.py "$out/" 2>/dev/null || true
    [ -d "$work/tuning" ] && tar -C "$work" -czf "$out/tuning.tar.gz" tuning
  fi

  echo "== build"
  "$kb" build-and-copy --nix never "$work"
  set +e
  # step VAR TITLE COMMAND...: one optional measurement, Helion's [AOT] lines dropped from its
  # output, its exit status in VAR.
  step() {
    local var=$1 title=$2
    shift 2
    echo "== $title (after $((SECONDS - t0)) s)"
    "$@" 2>&1 | grep -v '^\[AOT\]'
    printf -v "$var" %s "${PIPESTATUS[0]}"
  }
  local crc=0 drc=0
  [ "${COLD_START:-0}" = 1 ] && step crc "cold start" \
    python3 "$stage/bench/attention_cold_start.py" "$work/build" --out "$out/cold-start.json" \
    --timeout "${COLD_START_TIMEOUT:-300}"
  [ "${DO_BENCH:-0}" = 1 ] && step drc "do_bench cross-check" \
    python3 "$stage/bench/attention_do_bench.py" "$work/build" --out "$out/do-bench.json" \
    --shapes "${BENCH_SHAPES:-all}"
  if [ "${BENCH:-1}" = 0 ]; then
    echo "gpu-attention: tune $rc, cold start $crc, do_bench $drc, no bench, $((SECONDS - t0)) s in all"
    [ "$rc" = 0 ] && [ "$crc" = 0 ] && [ "$drc" = 0 ]
    return
  fi
  echo "== bench (after $((SECONDS - t0)) s)"
  python3 "$stage/bench/attention_h200.py" "$work/build" --out "$out/attention-h200.json" \
    --shapes "${BENCH_SHAPES:-all}" --deadline "${BENCH_DEADLINE:-150}" \
    --repeats "${REPEATS:-30}" 2>&1 | tee "$out/bench.log" | grep -v '^\[AOT\]'
  local brc=${PIPESTATUS[0]}
  set -e
  echo "gpu-attention: tune $rc, cold start $crc, do_bench $drc, bench $brc, $((SECONDS - t0)) s in all"
  [ "$rc" = 0 ] && [ "$crc" = 0 ] && [ "$drc" = 0 ] && [ "$brc" = 0 ]
}

case "${1:-}" in
  prepare) shift; prepare "$@" ;;
  device) device ;;
  *) echo "usage: $0 prepare [STAGE] | device" >&2; exit 2 ;;
esac
