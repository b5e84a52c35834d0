#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Exception.h>
#include <torch/headeronly/util/Half.h>

#include "../torch-ext/torch_binding.h"

namespace {

template <typename T>
void relu_loop(torch::stable::Tensor &out, const torch::stable::Tensor &x) {
  const T *xp = x.const_data_ptr<T>();
  T *op = out.mutable_data_ptr<T>();
  const T zero(0);
  for (int64_t i = 0, n = x.numel(); i < n; ++i) {
    // `x < 0 ? 0 : x` keeps NaN, as torch.relu does.
    op[i] = xp[i] < zero ? zero : xp[i];
  }
}

} // namespace

void relu(torch::stable::Tensor out, torch::stable::Tensor x) {
  STD_TORCH_CHECK(x.is_cpu(), "relu: x must be a CPU tensor");
  relu_check(out, x);
  using torch::headeronly::ScalarType;
  switch (x.scalar_type()) {
  case ScalarType::Float:
    relu_loop<float>(out, x);
    break;
  case ScalarType::Double:
    relu_loop<double>(out, x);
    break;
  case ScalarType::Half:
    relu_loop<torch::headeronly::Half>(out, x);
    break;
  case ScalarType::BFloat16:
    relu_loop<torch::headeronly::BFloat16>(out, x);
    break;
  default:
    STD_TORCH_CHECK(false, "relu: unsupported dtype ", torch::headeronly::toString(x.scalar_type()));
  }
}
