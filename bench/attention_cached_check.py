"""The cached path of kernels/attention-helion's `attention` on a GPU: every bench.py shape
(TUNED and HELD_OUT) called three times on fresh inputs, so calls two and three go through the
dispatch cache, each checked against a float64 SDPA reference (relative L2 error < 1e-2).

    python bench/attention_cached_check.py BUILD_DIR KERNEL_DIR

BUILD_DIR is the built tree (loaded with `kernels.get_local_kernel`), KERNEL_DIR the kernel's
source directory (for bench.py). Prints the last error per shape; exits 1 on any failure or
when the cache does not hold one entry per shape.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main() -> int:
    import torch
    import torch.nn.functional as F
    from kernels import get_local_kernel

    build_dir, kernel_dir = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    module = get_local_kernel(build_dir)
    impl = sys.modules[module.attention.__module__]
    sys.path.insert(0, str(kernel_dir))
    import bench

    shapes = bench.TUNED + bench.HELD_OUT
    failures = 0
    for s in shapes:
        for _ in range(3):
            size = (s.batch, s.heads, s.seq_len, s.head_dim)
            q, k, v = (torch.randn(size, device="cuda", dtype=s.dtype) for _ in range(3))
            out = module.attention(q, k, v, causal=s.causal)
            ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=s.causal)
            err = ((out.double() - ref).norm() / ref.norm()).item()
            if not err < 1e-2:  # NaN fails too
                failures += 1
        print(s.label(), f"{err:.2e}", flush=True)
    entries = len(impl._COMPILED)
    print("cache entries", entries, "failures", failures)
    return 1 if failures or entries != len(shapes) else 0


if __name__ == "__main__":
    sys.exit(main())
