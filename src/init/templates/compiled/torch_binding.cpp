#include <torch/library.h>

#include "registration.h"
#include "torch_binding.h"

// The op is registered in the kernel's own op namespace (TORCH_EXTENSION_NAME,
// `_{{python_name}}_<backend>_<unique id>`), so two builds of this kernel can be loaded side by
// side. Each build variant compiles the sources of one backend, which defines its *_KERNEL
// macro.
TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("{{python_name}}(Tensor! out, Tensor x, Tensor y) -> ()");
#if defined(CPU_KERNEL)
  ops.impl("{{python_name}}", torch::kCPU, &{{python_name}});
#elif defined(CUDA_KERNEL) || defined(ROCM_KERNEL)
  ops.impl("{{python_name}}", torch::kCUDA, &{{python_name}});
#elif defined(METAL_KERNEL)
  ops.impl("{{python_name}}", torch::kMPS, &{{python_name}});
#elif defined(XPU_KERNEL)
  ops.impl("{{python_name}}", torch::kXPU, &{{python_name}});
#endif
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
