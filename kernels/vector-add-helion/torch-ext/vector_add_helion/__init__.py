"""Element-wise addition of two 1-D tensors, written in Helion.

The kernel is compiled by Helion on first use. Its launch configuration comes from the
ahead-of-time heuristic shipped next to ``vector_add.py`` (``_helion_aot_vector_add_<device>.py``),
so no autotuning runs on the user's machine.
"""

from .vector_add import vector_add

__all__ = ["vector_add"]
