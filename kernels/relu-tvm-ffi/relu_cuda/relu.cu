// relu on a CUDA GPU: one thread per element, out[i] = x[i] < 0 ? 0 : x[i].
#include <cuda_runtime.h>

#include <cstdint>

#include "relu_kernels.h"

namespace {
template <typename T>
__global__ void relu_kernel(T *out, const T *x, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = x[i] < T(0) ? T(0) : x[i];
  }
}

template <typename T>
const char *launch(T *out, const T *x, int64_t n, int device, void *stream) {
  if (n == 0) {
    return nullptr;
  }
  int previous = 0;
  cudaError_t err = cudaGetDevice(&previous);
  if (err == cudaSuccess && previous != device) {
    err = cudaSetDevice(device);
  }
  if (err == cudaSuccess) {
    constexpr int threads = 256;
    const auto blocks = static_cast<unsigned>((n + threads - 1) / threads);
    relu_kernel<T><<<blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(out, x, n);
    err = cudaGetLastError();
  }
  if (previous != device) {
    cudaSetDevice(previous);
  }
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}
}  // namespace

const char *relu_cuda_f32(float *out, const float *x, int64_t n, int device, void *stream) {
  return launch(out, x, n, device, stream);
}
const char *relu_cuda_f64(double *out, const double *x, int64_t n, int device, void *stream) {
  return launch(out, x, n, device, stream);
}
