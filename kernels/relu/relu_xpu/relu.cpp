#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>
#include <c10/xpu/XPUStream.h>
#include <sycl/sycl.hpp>

#include "../torch-ext/torch_binding.h"

void relu(at::Tensor &out, const at::Tensor &x) {
  TORCH_CHECK(x.device().is_xpu(), "relu: x must be an XPU tensor");
  relu_check(out, x);
  const int64_t n = x.numel();
  if (n == 0) {
    return;
  }
  const c10::DeviceGuard device_guard(x.device());
  sycl::queue &queue = c10::xpu::getCurrentXPUStream().queue();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, x.scalar_type(),
                                  "relu_xpu", [&] {
    const scalar_t *xp = x.const_data_ptr<scalar_t>();
    scalar_t *op = out.mutable_data_ptr<scalar_t>();
    queue.parallel_for(sycl::range<1>(static_cast<size_t>(n)), [=](sycl::id<1> i) {
      const scalar_t zero(0);
      op[i] = xp[i] < zero ? zero : xp[i];
    });
  });
}
