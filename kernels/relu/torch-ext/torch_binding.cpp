#include <torch/library.h>

#include "registration.h"
#include "torch_binding.h"

void relu_check(const at::Tensor &out, const at::Tensor &x) {
  TORCH_CHECK(out.device() == x.device(), "relu: out and x must be on the same device");
  TORCH_CHECK(out.sizes() == x.sizes(), "relu: out and x must have the same shape");
  TORCH_CHECK(out.scalar_type() == x.scalar_type(), "relu: out and x must have the same dtype");
  TORCH_CHECK(out.is_contiguous() && x.is_contiguous(), "relu: out and x must be contiguous");
}

// The op lives in this build's own namespace (TORCH_EXTENSION_NAME,
// `_relu_<backend>_<unique id>`), so several builds can be loaded side by side.
TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("relu(Tensor! out, Tensor x) -> ()");
#if defined(CPU_KERNEL)
  ops.impl("relu", c10::kCPU, &relu);
#elif defined(CUDA_KERNEL) || defined(ROCM_KERNEL)
  ops.impl("relu", c10::kCUDA, &relu);
#elif defined(METAL_KERNEL)
  ops.impl("relu", c10::kMPS, &relu);
#elif defined(XPU_KERNEL)
  ops.impl("relu", c10::kXPU, &relu);
#endif
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
