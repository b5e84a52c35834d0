#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "../torch-ext/torch_binding.h"

void {{python_name}}(torch::Tensor &out, torch::Tensor const &x, torch::Tensor const &y) {
  TORCH_CHECK(x.device().is_cpu(), "{{python_name}}: x must be a CPU tensor");
  TORCH_CHECK(y.device() == x.device() && out.device() == x.device(),
              "{{python_name}}: out, x and y must be on the same device");
  TORCH_CHECK(y.sizes() == x.sizes() && out.sizes() == x.sizes(),
              "{{python_name}}: out, x and y must have the same shape");
  TORCH_CHECK(y.scalar_type() == x.scalar_type() && out.scalar_type() == x.scalar_type(),
              "{{python_name}}: out, x and y must have the same dtype");
  TORCH_CHECK(x.is_contiguous() && y.is_contiguous() && out.is_contiguous(),
              "{{python_name}}: out, x and y must be contiguous");

  const int64_t n = x.numel();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, x.scalar_type(),
                                  "{{python_name}}_cpu", [&] {
    const scalar_t *xp = x.data_ptr<scalar_t>();
    const scalar_t *yp = y.data_ptr<scalar_t>();
    scalar_t *op = out.data_ptr<scalar_t>();
    at::parallel_for(0, n, /*grain_size=*/32768, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        op[i] = xp[i] + yp[i];
      }
    });
  });
}
