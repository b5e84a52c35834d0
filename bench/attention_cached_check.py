"""The cached path of kernels/attention-helion's `attention` on a GPU: every bench.py shape
(TUNED and HELD_OUT) called three times on fresh inputs, so calls two and three go through the
dispatch cache, each checked against a float64 SDPA reference (relative L2 error < 1e-2). The
first shape is then called twice on inputs 2 bytes off 16-byte alignment (contiguous views at
an odd offset: the shapes and strides of a cached call, but no address a TMA descriptor takes).

    python bench/attention_cached_check.py BUILD_DIR KERNEL_DIR

BUILD_DIR is the built tree (loaded with `kernels.get_local_kernel`), KERNEL_DIR the kernel's
source directory (for bench.py). Prints the last error per shape and the dispatch cache's
entries; exits 1 on any failure or when the dispatch cache does not hold one entry per shape.
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

    def inputs(s, misaligned):
        size = (s.batch, s.heads, s.seq_len, s.head_dim)
        if not misaligned:
            return tuple(torch.randn(size, device="cuda", dtype=s.dtype) for _ in range(3))
        n = s.batch * s.heads * s.seq_len * s.head_dim
        bases = (torch.randn(n + 1, device="cuda", dtype=s.dtype) for _ in range(3))
        return tuple(b[1:].view(size) for b in bases)

    failures = 0
    runs = [(s, False) for s in shapes] + [(shapes[0], True)]
    for s, misaligned in runs:
        for _ in range(3 if not misaligned else 2):
            q, k, v = inputs(s, misaligned)
            out = module.attention(q, k, v, causal=s.causal)
            ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=s.causal)
            err = ((out.double() - ref).norm() / ref.norm()).item()
            if not err < 1e-2:  # NaN fails too
                failures += 1
        print(s.label(), "misaligned" if misaligned else "", f"{err:.2e}", flush=True)
    entries = len(impl._COMPILED)
    print("dispatch cache entries", entries, "failures", failures)
    return 1 if failures or entries != len(shapes) else 0


if __name__ == "__main__":
    sys.exit(main())
