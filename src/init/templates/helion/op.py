"""The `{{python_name}}` op, written in Helion.

`@helion.aot_kernel` runs the kernel with configurations tuned ahead of time: Helion looks for
a heuristic file next to this one, `_helion_aot_op_<device>_<compute>.py` (for example
`_helion_aot_op_cuda_sm90.py` for an H100 or H200), that picks a configuration from the
input shapes in microseconds. Helion's AOT runner writes that file from the shapes listed in
bench.py (see README.md); commit it and it ships with every build. Without one, Helion uses
its default configuration and warns once.
"""

import helion
import helion.language as hl
import torch


@helion.aot_kernel()
def {{python_name}}_kernel(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # 1-D only: the configurations tuned for one rank do not fit another, so the wrapper
    # below flattens its inputs and every call shares one heuristic.
    out = torch.empty_like(x)
    for tile in hl.tile(out.size(0)):
        out[tile] = x[tile] + y[tile]
    return out


def {{python_name}}(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Element-wise `x + y` of two tensors with the same shape, dtype and device."""
    if x.shape != y.shape:
        raise ValueError(f"{{python_name}}: shapes differ: {tuple(x.shape)} and {tuple(y.shape)}")
    if x.dtype != y.dtype:
        raise ValueError(f"{{python_name}}: dtypes differ: {x.dtype} and {y.dtype}")
    if x.device != y.device:
        raise ValueError(f"{{python_name}}: devices differ: {x.device} and {y.device}")
    return {{python_name}}_kernel(x.reshape(-1), y.reshape(-1)).view(x.shape)
