"""Per-shape table of `kernel-builder tune`: the tuned config against Helion's default config.

Run after the AOT runner has written the heuristic, with HELION_AOT_MODE=evaluate:

    python measure.py --bench BENCH --out TABLE.json [--kernel NAME]... -- [BENCH ARGS]...

It runs the bench script as ``__main__`` with every Helion kernel call recorded (the first
call of each distinct shape), then, for each recorded call, times the config Helion chose
(the heuristic's, in evaluate mode) and ``config_spec.default_config()`` with
``triton.testing.do_bench`` (median, L2 flushed between runs). Writes TABLE.json:
``{"calls": [{"kernel", "features", "heuristic_file", "tuned_config", "default_config",
"tuned_ms", "default_ms", "error"}]}``; times in milliseconds, ``null`` where a config failed.
Exit status: the bench script's when it fails, 3 when it called no Helion kernel, else 0.
"""

from __future__ import annotations

import argparse
import json
import runpy
import sys
import traceback


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--kernel", action="append", default=[])
    parser.add_argument("bench_args", nargs=argparse.REMAINDER)
    opts = parser.parse_args()
    bench_args = opts.bench_args[1:] if opts.bench_args[:1] == ["--"] else opts.bench_args

    import triton.testing
    from helion.autotuner.aot_cache import find_heuristic_file
    from helion.autotuner.aot_kernel import extract_shape_features
    from helion.runtime.kernel import Kernel

    calls: list[tuple] = []
    seen: set[tuple[str, str]] = set()
    original_call = Kernel.__call__

    def recording_call(self, *args, **kwargs):
        if kwargs:
            args = tuple(self.normalize_args(*args, **kwargs))
        result = original_call(self, *args)
        if not opts.kernel or self.name in opts.kernel:
            features = extract_shape_features(args)
            key = (self.name, json.dumps(features, sort_keys=True, default=str))
            if key not in seen:
                seen.add(key)
                calls.append((self, args, features))
        return result

    Kernel.__call__ = recording_call
    sys.argv = [opts.bench, *bench_args]
    try:
        runpy.run_path(opts.bench, run_name="__main__")
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        if code != 0:
            print(f"measure: the bench script exited with status {code}", file=sys.stderr)
            return code
    finally:
        Kernel.__call__ = original_call
    if not calls:
        print("measure: the bench script called no Helion kernel", file=sys.stderr)
        return 3

    def time_config(bound, args, config):
        fn = bound.compile_config(config, allow_print=False)
        return float(
            triton.testing.do_bench(lambda: fn(*args), warmup=25, rep=100, return_mode="median")
        )

    rows = []
    for kernel, args, features in calls:
        bound = kernel.bind(args)
        row = {
            "kernel": kernel.name,
            "features": features,
            "heuristic_file": None,
            "tuned_config": None,
            "default_config": None,
            "tuned_ms": None,
            "default_ms": None,
            "error": None,
        }
        heuristic = find_heuristic_file(kernel.fn.__code__.co_filename, kernel_name=kernel.name)
        row["heuristic_file"] = str(heuristic) if heuristic is not None else None
        errors = []
        tuned = getattr(bound, "_config", None)
        if tuned is not None:
            row["tuned_config"] = dict(tuned)
            try:
                row["tuned_ms"] = time_config(bound, args, tuned)
            except Exception as err:
                errors.append("tuned config: " + "".join(traceback.format_exception_only(err)).strip())
        else:
            errors.append("Helion chose no config for this call")
        default = bound.config_spec.default_config()
        row["default_config"] = dict(default)
        try:
            row["default_ms"] = time_config(bound, args, default)
        except Exception as err:
            errors.append("default config: " + "".join(traceback.format_exception_only(err)).strip())
        row["error"] = "; ".join(errors) or None
        rows.append(row)
        print(
            f"measure: {kernel.name} default {row['default_ms']} ms, tuned {row['tuned_ms']} ms",
            file=sys.stderr,
            flush=True,
        )
    with open(opts.out, "w") as f:
        json.dump({"calls": rows}, f, indent=2, default=str)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
