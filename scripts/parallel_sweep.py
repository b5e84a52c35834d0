#!/usr/bin/env python3
"""Issue 32's parallelism sweep: one kernel built cold, again and again, under different
Ninja jobs × nvcc threads × cicc splits, on one machine in one run, so that the settings compare.

  parallel_sweep.py run KERNEL_DIR --kb KERNEL_BUILDER --out DIR --caps 8.0,9.0 --variant CELL \
      --setting default= --setting upstream=8:2:1 --setting more-split=::3 ... \
      [--passes 2 | --sequence a,b,c,a] [--budget-s 540] [--warmup OTHER_KERNEL_DIR]
  parallel_sweep.py report DIR/sweep.jsonl...        # the Markdown table

A setting is NAME=JOBS:THREADS:SPLIT, each number set as KERNEL_BUILDER_JOBS,
KERNEL_BUILDER_NVCC_THREADS and KERNEL_BUILDER_NVCC_SPLIT_COMPILE, an empty one left for
kernel-builder to choose (`default=` sets none: kernel-builder's own rule). Every build is
`build-and-copy --nix never --no-cache --python python3 --variant CELL --cuda-capabilities CAPS` with the
compile cache off (KERNEL_BUILDER_COMPILE_CACHE=off) and CMake's work directory removed
before it: cold each time. Passes alternate the order (forward, then reversed), so that no
setting always runs first or last; `--sequence` gives the order instead. A build that its
setting's last wall (else the shortest seen) says cannot finish in the budget left is not
started. `--warmup` builds another kernel first, untimed in the
table: it fills the torch probe's cache and the page cache, which the first timed build
would otherwise pay alone.

Per build, one JSON line in DIR/sweep.jsonl: the wall seconds of the whole build-and-copy,
the plan kernel-builder reports (`--json`'s `parallel`), the CPU seconds of its process tree
(user + system, from getrusage of a wrapper process), the largest single process's peak RSS
(the same getrusage), the peak of the summed RSS of the build's process tree (sampled every
0.2 s) and the peak drop of MemAvailable against before the build, and Ninja's log (each
compile's seconds), copied into DIR/ninja-<pass>-<name>.log.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path


def mem_available() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def tree_rss(pid: int) -> int:
    """The summed RSS of `pid` and its descendants, from /proc (no psutil needed)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/statm") as f:
                resident = int(f.read().split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry))
        rss[int(entry)] = resident
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        total += rss.get(p, 0)
        stack.extend(children.get(p, []))
    return total


def wrap(args: argparse.Namespace) -> None:
    """Run the command, then write getrusage(RUSAGE_CHILDREN) of this fresh process: the
    process tree's CPU seconds and its largest process's peak RSS, for this build alone."""
    proc = subprocess.Popen(args.cmd, stdout=open(args.stdout, "w"), stderr=open(args.stderr, "w"))
    signal.signal(signal.SIGTERM, lambda *_: proc.send_signal(signal.SIGINT))
    status = proc.wait()
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    Path(args.rusage).write_text(json.dumps({
        "status": status, "cpu_s": round(ru.ru_utime + ru.ru_stime, 1),
        "user_s": round(ru.ru_utime, 1), "max_proc_rss_kib": ru.ru_maxrss,
    }))
    sys.exit(0 if status == 0 else 1)


def parse_setting(text: str) -> tuple[str, dict[str, str]]:
    name, _, spec = text.partition("=")
    parts = (spec.split(":") + ["", "", ""])[:3] if spec else ["", "", ""]
    env = {}
    for var, value in zip(("KERNEL_BUILDER_JOBS", "KERNEL_BUILDER_NVCC_THREADS",
                           "KERNEL_BUILDER_NVCC_SPLIT_COMPILE"), parts):
        if value.strip():
            env[var] = value.strip()
    return name, env


def ninja_log(cache_dir: Path) -> Path | None:
    logs = sorted(cache_dir.glob("cmake-v1/**/.ninja_log"), key=lambda p: p.stat().st_mtime)
    return logs[-1] if logs else None


def compiles(log: Path) -> list[tuple[str, float]]:
    """(output, seconds) of each step of the newest build in Ninja's log."""
    rows = []
    for line in log.read_text().splitlines():
        if line.startswith("#"):
            continue
        f = line.split("\t")
        if len(f) >= 4:
            rows.append((f[3], (int(f[1]) - int(f[0])) / 1000))
    return rows


def build(kdir: Path, kb: str, caps: str, variant: str, env_set: dict, cache_dir: Path, out: Path,
          tag: str, limit: float) -> dict:
    shutil.rmtree(cache_dir / "cmake-v1", ignore_errors=True)
    shutil.rmtree(kdir / "build", ignore_errors=True)
    env = dict(os.environ)
    for var in ("KERNEL_BUILDER_JOBS", "KERNEL_BUILDER_NVCC_THREADS", "KERNEL_BUILDER_NVCC_SPLIT_COMPILE"):
        env.pop(var, None)
    env.update(env_set)
    env["KERNEL_BUILDER_COMPILE_CACHE"] = "off"
    env["KERNEL_BUILDER_CACHE_DIR"] = str(cache_dir)
    cmd = [kb, "build-and-copy", str(kdir), "--nix", "never", "--python", "python3", "--no-cache",
           "--json", "--variant", variant, "--cuda-capabilities", caps]
    stem = out / f"build-{tag}"
    wrapper = [sys.executable, __file__, "_wrap", "--stdout", f"{stem}.out", "--stderr", f"{stem}.err",
               "--rusage", f"{stem}.rusage", "--", *cmd]
    before = mem_available()
    peak = {"tree": 0, "drop": 0}
    done = threading.Event()
    start = time.monotonic()
    proc = subprocess.Popen(wrapper, env=env, start_new_session=True)

    def sample() -> None:
        while not done.wait(0.2):
            peak["tree"] = max(peak["tree"], tree_rss(proc.pid))
            peak["drop"] = max(peak["drop"], before - mem_available())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        proc.wait(timeout=limit)
        finished = True
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        finished = False
    wall = time.monotonic() - start
    done.set()
    sampler.join()
    rec: dict = {"wall_s": round(wall, 1), "finished": finished,
                 "peak_tree_rss_gib": round(peak["tree"] / 2**30, 2),
                 "peak_mem_drop_gib": round(peak["drop"] / 2**30, 2)}
    try:
        ru = json.loads(Path(f"{stem}.rusage").read_text())
        rec.update(ru)
        rec["max_proc_rss_gib"] = round(ru.pop("max_proc_rss_kib") / 2**20, 2)
    except (OSError, ValueError, KeyError):
        pass
    try:
        doc = json.loads(Path(f"{stem}.out").read_text())
        variants = doc.get("variants") or []
        rec["plan"] = variants[0].get("parallel") if variants else None
    except (OSError, ValueError, AttributeError):
        rec["plan"] = None
    if not finished or rec.get("status", 1) != 0:
        err = Path(f"{stem}.err").read_text(errors="replace") if Path(f"{stem}.err").exists() else ""
        rec["error_tail"] = err[-1500:]
    log = ninja_log(cache_dir)
    if log:
        shutil.copy(log, out / f"ninja-{tag}.log")
        steps = sorted(compiles(log), key=lambda r: -r[1])
        rec["compiles"] = {Path(name).name: s for name, s in steps if name.endswith(".o")}
    return rec


def run(args: argparse.Namespace) -> None:
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    kdir = Path(args.kernel).resolve()
    cache_dir = Path(args.cache_dir).resolve()
    settings = [parse_setting(s) for s in args.setting]
    t0 = time.monotonic()
    results = out / "sweep.jsonl"
    machine = {
        "cores": os.cpu_count(),
        "mem_total_gib": round(int(open("/proc/meminfo").readline().split()[1]) / 2**20, 1),
    }
    print(f"sweep: {machine}, {len(settings)} settings × {args.passes} passes, caps {args.caps}", flush=True)
    if args.warmup:
        rec = build(Path(args.warmup).resolve(), args.kb, args.warmup_caps or args.caps, args.variant, {},
                    cache_dir, out, "warmup", args.budget_s)
        rec.update({"setting": "warmup", "kernel": Path(args.warmup).name})
        print(json.dumps(rec), flush=True)
        with open(results, "a") as f:
            f.write(json.dumps(rec) + "\n")
    # The order: --sequence NAME,NAME,... as given, else the passes, forward then reversed.
    by_name = dict(settings)
    if args.sequence:
        order = [(n, by_name[n]) for n in args.sequence.split(",")]
    else:
        order = [s for p in range(args.passes) for s in (settings if p % 2 == 0 else settings[::-1])]
    walls: dict[str, float] = {}
    runs: dict[str, int] = {}
    for name, env_set in order:
        left = args.budget_s - (time.monotonic() - t0)
        # A setting's own last wall, else the shortest seen: a build that cannot finish in
        # what is left is not started (one that was guessed short is stopped at the limit).
        guess = walls.get(name, min(walls.values(), default=30.0))
        if left < guess * 1.05 + 5:
            print(f"sweep: {name} not started: {left:.0f} s left, about {guess:.0f} s needed", flush=True)
            continue
        runs[name] = runs.get(name, 0) + 1
        rec = build(kdir, args.kb, args.caps, args.variant, env_set, cache_dir, out, f"{name}-{runs[name]}",
                    left - 5)
        walls[name] = rec["wall_s"]
        rec.update({"setting": name, "env": env_set, "pass": runs[name], "kernel": kdir.name,
                    "caps": args.caps, **machine})
        line = json.dumps(rec)
        print(line, flush=True)
        with open(results, "a") as f:
            f.write(line + "\n")
    print(f"sweep: {time.monotonic() - t0:.0f} s", flush=True)


def report(args: argparse.Namespace) -> None:
    rows: dict[str, list[dict]] = {}
    for path in args.results:
        for line in Path(path).read_text().splitlines():
            r = json.loads(line)
            if r.get("setting") != "warmup":
                rows.setdefault(r["setting"], []).append(r)
    print("| setting | plan (jobs × nvcc threads × cicc splits) | wall s (each pass) | CPU s | "
          "peak tree RSS GiB | largest process GiB | slowest compile |")
    print("|---|---|---|---|---|---|---|")
    for name, rs in rows.items():
        plan = rs[0].get("plan") or {}
        p = f"{plan.get('ninja-jobs')} × {plan.get('nvcc-threads')} × {plan.get('split-compile')}" if plan else "?"
        walls = ", ".join(f"{r['wall_s']}" + ("" if r.get("finished") and r.get("status") == 0 else " (failed)")
                          for r in rs)
        cpu = ", ".join(str(r.get("cpu_s", "?")) for r in rs)
        tree = max(r.get("peak_tree_rss_gib", 0) for r in rs)
        proc = max(r.get("max_proc_rss_gib", 0) for r in rs)
        slow = max(((k, v) for r in rs for k, v in (r.get("compiles") or {}).items()), key=lambda kv: kv[1],
                   default=("?", 0))
        print(f"| {name} | {p} | {walls} | {cpu} | {tree} | {proc} | {slow[0]} {slow[1]:.1f} s |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="verb", required=True)
    r = sub.add_parser("run")
    r.add_argument("kernel")
    r.add_argument("--kb", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--caps", required=True)
    r.add_argument("--variant", required=True, help="the cell, e.g. torch211-cxx11-cu130-x86_64-linux")
    r.add_argument("--setting", action="append", required=True)
    r.add_argument("--passes", type=int, default=2)
    r.add_argument("--sequence", help="the settings' names in the order to build them, repeats allowed")
    r.add_argument("--budget-s", type=float, default=540)
    r.add_argument("--cache-dir", default="/tmp/kb-sweep-cache")
    r.add_argument("--warmup")
    r.add_argument("--warmup-caps")
    w = sub.add_parser("_wrap")
    w.add_argument("--stdout", required=True)
    w.add_argument("--stderr", required=True)
    w.add_argument("--rusage", required=True)
    w.add_argument("cmd", nargs=argparse.REMAINDER)
    rp = sub.add_parser("report")
    rp.add_argument("results", nargs="+")
    args = p.parse_args()
    if args.verb == "_wrap" and args.cmd and args.cmd[0] == "--":
        args.cmd = args.cmd[1:]
    {"run": run, "_wrap": wrap, "report": report}[args.verb](args)


if __name__ == "__main__":
    main()
