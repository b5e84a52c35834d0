#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include <algorithm>

#include "../torch-ext/torch_binding.h"

namespace {

// Grid-stride loop: any number of elements with a bounded grid. `v < 0 ? 0 : v` keeps NaN, as
// torch.relu does. The half types compare through float (cuda_fp16.h / cuda_bf16.h: the stable
// ABI has no device-side scalar types of its own).
template <typename T>
__global__ void relu_kernel(T *__restrict__ out, const T *__restrict__ x, int64_t n) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const T v = x[i];
    out[i] = static_cast<float>(v) < 0.0f ? T(0.0f) : v;
  }
}

template <typename T>
void launch(torch::stable::Tensor &out, const torch::stable::Tensor &x, cudaStream_t stream) {
  const int64_t n = x.numel();
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, 65535);
  relu_kernel<T><<<static_cast<unsigned int>(blocks), threads, 0, stream>>>(
      static_cast<T *>(out.mutable_data_ptr()), static_cast<const T *>(x.const_data_ptr()), n);
  const cudaError_t err = cudaGetLastError();
  STD_TORCH_CHECK(err == cudaSuccess, "relu: CUDA launch failed: ", cudaGetErrorString(err));
}

} // namespace

void relu(torch::stable::Tensor out, torch::stable::Tensor x) {
  STD_TORCH_CHECK(x.is_cuda(), "relu: x must be a CUDA tensor");
  relu_check(out, x);
  if (x.numel() == 0) {
    return;
  }
  // The device and stream come through the C shim (aoti_torch_*), not c10::cuda.
  const torch::stable::accelerator::DeviceGuard guard(x.get_device_index());
  void *stream_ptr = nullptr;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_current_cuda_stream(x.get_device_index(), &stream_ptr));
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  using torch::headeronly::ScalarType;
  switch (x.scalar_type()) {
  case ScalarType::Float:
    launch<float>(out, x, stream);
    break;
  case ScalarType::Double:
    launch<double>(out, x, stream);
    break;
  case ScalarType::Half:
    launch<__half>(out, x, stream);
    break;
  case ScalarType::BFloat16:
    launch<__nv_bfloat16>(out, x, stream);
    break;
  default:
    STD_TORCH_CHECK(false, "relu: unsupported dtype ", torch::headeronly::toString(x.scalar_type()));
  }
}
