// The kernels behind the binding (tvm_ffi_binding.cpp): plain pointers and element counts, so
// the kernel sources need neither tvm-ffi's nor torch's headers (nvcc compiles relu.cu alone).
#pragma once

#include <cstdint>

#ifdef CPU_KERNEL
// out[i] = max(x[i], 0) for i < n; NaN stays NaN, as in torch.relu.
void relu_cpu_f32(float *out, const float *x, int64_t n);
void relu_cpu_f64(double *out, const double *x, int64_t n);
#endif

#ifdef CUDA_KERNEL
// The same on the GPU `device`, queued on `stream` (a cudaStream_t; null: the default
// stream). Returns null, or CUDA's message when the launch failed.
const char *relu_cuda_f32(float *out, const float *x, int64_t n, int device, void *stream);
const char *relu_cuda_f64(double *out, const double *x, int64_t n, int device, void *stream);
#endif
