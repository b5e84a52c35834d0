#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>

#include "../torch-ext/torch_binding.h"

void relu(at::Tensor &out, const at::Tensor &x) {
  TORCH_CHECK(x.device().is_cpu(), "relu: x must be a CPU tensor");
  relu_check(out, x);
  const int64_t n = x.numel();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, x.scalar_type(),
                                  "relu_cpu", [&] {
    const scalar_t *xp = x.const_data_ptr<scalar_t>();
    scalar_t *op = out.mutable_data_ptr<scalar_t>();
    const scalar_t zero(0);
    for (int64_t i = 0; i < n; ++i) {
      // `x < 0 ? 0 : x` keeps NaN, as torch.relu does.
      op[i] = xp[i] < zero ? zero : xp[i];
    }
  });
}
