#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>

#include "../torch-ext/torch_binding.h"

// Grid-stride loop: any number of elements with a bounded grid.
template <typename scalar_t>
__global__ void relu_kernel(scalar_t *__restrict__ out, const scalar_t *__restrict__ x, int64_t n) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  const scalar_t zero(0);
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const scalar_t v = x[i];
    out[i] = static_cast<float>(v) < 0.0f ? zero : v;
  }
}

void relu(at::Tensor &out, const at::Tensor &x) {
  TORCH_CHECK(x.device().is_cuda(), "relu: x must be a CUDA tensor");
  relu_check(out, x);
  const int64_t n = x.numel();
  if (n == 0) {
    return;
  }
  const c10::cuda::OptionalCUDAGuard device_guard(x.device());
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, 65535);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, x.scalar_type(),
                                  "relu_cuda", [&] {
    relu_kernel<scalar_t><<<static_cast<unsigned int>(blocks), threads, 0, stream>>>(
        out.mutable_data_ptr<scalar_t>(), x.const_data_ptr<scalar_t>(), n);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
