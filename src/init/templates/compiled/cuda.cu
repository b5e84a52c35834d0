#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/torch.h>

#include <algorithm>

#include "../torch-ext/torch_binding.h"

// Grid-stride loop: any number of elements with a bounded grid.
template <typename scalar_t>
__global__ void {{python_name}}_kernel(scalar_t *__restrict__ out, const scalar_t *__restrict__ x,
                                       const scalar_t *__restrict__ y, int64_t n) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = x[i] + y[i];
  }
}

void {{python_name}}(torch::Tensor &out, torch::Tensor const &x, torch::Tensor const &y) {
  TORCH_CHECK(x.device().is_cuda(), "{{python_name}}: x must be a CUDA tensor");
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
  const at::cuda::OptionalCUDAGuard device_guard(x.device());
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, 65535);
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, x.scalar_type(),
                                  "{{python_name}}_cuda", [&] {
    {{python_name}}_kernel<scalar_t><<<static_cast<unsigned int>(blocks), threads, 0, stream>>>(
        out.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), n);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
