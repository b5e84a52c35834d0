#include <ATen/Dispatch.h>
#include <c10/core/DeviceGuard.h>
#include <c10/xpu/XPUStream.h>
#include <sycl/sycl.hpp>
#include <torch/torch.h>

#include "../torch-ext/torch_binding.h"

void {{python_name}}(torch::Tensor &out, torch::Tensor const &x, torch::Tensor const &y) {
  TORCH_CHECK(x.device().is_xpu(), "{{python_name}}: x must be an XPU tensor");
  TORCH_CHECK(y.device() == x.device() && out.device() == x.device(),
              "{{python_name}}: out, x and y must be on the same device");
  TORCH_CHECK(y.sizes() == x.sizes() && out.sizes() == x.sizes(),
              "{{python_name}}: out, x and y must have the same shape");
  TORCH_CHECK(y.scalar_type() == x.scalar_type() && out.scalar_type() == x.scalar_type(),
              "{{python_name}}: out, x and y must have the same dtype");
  TORCH_CHECK(x.is_contiguous() && y.is_contiguous() && out.is_contiguous(),
              "{{python_name}}: out, x and y must be contiguous");

  const int64_t n = x.numel();
  if (n == 0) {
    return;
  }
  const c10::DeviceGuard device_guard(x.device());
  sycl::queue &queue = c10::xpu::getCurrentXPUStream().queue();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, x.scalar_type(),
                                  "{{python_name}}_xpu", [&] {
    const scalar_t *xp = x.data_ptr<scalar_t>();
    const scalar_t *yp = y.data_ptr<scalar_t>();
    scalar_t *op = out.data_ptr<scalar_t>();
    queue.parallel_for(sycl::range<1>(static_cast<size_t>(n)),
                       [=](sycl::id<1> i) { op[i] = xp[i] + yp[i]; });
  });
}
