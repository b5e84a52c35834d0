#include <torch/csrc/stable/library.h>
#include <torch/headeronly/util/Exception.h>

#include "registration.h"
#include "torch_binding.h"

void relu_check(const torch::stable::Tensor &out, const torch::stable::Tensor &x) {
  STD_TORCH_CHECK(out.get_device_index() == x.get_device_index() && out.is_cpu() == x.is_cpu(),
                  "relu: out and x must be on the same device");
  STD_TORCH_CHECK(out.dim() == x.dim(), "relu: out and x must have the same shape");
  for (int64_t d = 0; d < x.dim(); ++d) {
    STD_TORCH_CHECK(out.size(d) == x.size(d), "relu: out and x must have the same shape");
  }
  STD_TORCH_CHECK(out.scalar_type() == x.scalar_type(), "relu: out and x must have the same dtype");
  STD_TORCH_CHECK(out.is_contiguous() && x.is_contiguous(), "relu: out and x must be contiguous");
}

// The op lives in this build's own namespace (TORCH_EXTENSION_NAME,
// `_relu_stable_abi_<backend>_<unique id>`), registered through the stable C shim.
STABLE_TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("relu(Tensor(a!) out, Tensor x) -> ()");
}

#if defined(CPU_KERNEL)
STABLE_TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CPU, ops) {
  ops.impl("relu", TORCH_BOX(&relu));
}
#endif

#if defined(CUDA_KERNEL)
STABLE_TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CUDA, ops) {
  ops.impl("relu", TORCH_BOX(&relu));
}
#endif

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
