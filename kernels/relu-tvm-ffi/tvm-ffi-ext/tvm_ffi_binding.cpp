// The TVM-FFI functions of this kernel: `relu_cpu(out, x)` in the CPU variant,
// `relu_cuda(out, x)` in the CUDA one. Each checks its tensors (same device, dtype and shape,
// contiguous, float32 or float64) and runs the backend's kernel; a bad call raises a Python
// ValueError or TypeError through tvm-ffi.
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

#include "relu_kernels.h"

namespace {

using tvm::ffi::TensorView;

enum class Kind { F32, F64 };

// The checks shared by every backend; returns the element type.
Kind check(const TensorView &out, const TensorView &x, DLDeviceType device) {
  TVM_FFI_CHECK(x.device().device_type == device, ValueError)
      << "x is on device type " << x.device().device_type << ", this function takes device type " << device;
  TVM_FFI_CHECK(out.device().device_type == x.device().device_type && out.device().device_id == x.device().device_id,
                ValueError)
      << "out and x must be on the same device";
  TVM_FFI_CHECK(out.ndim() == x.ndim(), ValueError) << "out has " << out.ndim() << " dimensions, x has " << x.ndim();
  for (int32_t i = 0; i < x.ndim(); ++i) {
    TVM_FFI_CHECK(out.size(i) == x.size(i), ValueError)
        << "out and x differ in dimension " << i << " (" << out.size(i) << " vs " << x.size(i) << ")";
  }
  TVM_FFI_CHECK(x.IsContiguous() && out.IsContiguous(), ValueError) << "out and x must be contiguous";
  const DLDataType t = x.dtype(), o = out.dtype();
  TVM_FFI_CHECK(t.code == o.code && t.bits == o.bits && t.lanes == o.lanes, TypeError)
      << "out and x must have the same dtype";
  TVM_FFI_CHECK(t.code == kDLFloat && t.lanes == 1 && (t.bits == 32 || t.bits == 64), TypeError)
      << "relu takes float32 or float64 tensors";
  return t.bits == 32 ? Kind::F32 : Kind::F64;
}

#ifdef CPU_KERNEL
void relu_cpu(TensorView out, TensorView x) {
  const int64_t n = x.numel();
  if (check(out, x, kDLCPU) == Kind::F32) {
    relu_cpu_f32(static_cast<float *>(out.data_ptr()), static_cast<const float *>(x.data_ptr()), n);
  } else {
    relu_cpu_f64(static_cast<double *>(out.data_ptr()), static_cast<const double *>(x.data_ptr()), n);
  }
}
#endif

#ifdef CUDA_KERNEL
void relu_cuda(TensorView out, TensorView x) {
  const int64_t n = x.numel();
  const Kind kind = check(out, x, kDLCUDA);
  const int device = x.device().device_id;
  // The stream the caller runs on (tvm-ffi's torch interop passes torch's current stream).
  void *stream = TVMFFIEnvGetStream(kDLCUDA, device);
  const char *err = kind == Kind::F32
                        ? relu_cuda_f32(static_cast<float *>(out.data_ptr()),
                                        static_cast<const float *>(x.data_ptr()), n, device, stream)
                        : relu_cuda_f64(static_cast<double *>(out.data_ptr()),
                                        static_cast<const double *>(x.data_ptr()), n, device, stream);
  TVM_FFI_CHECK(err == nullptr, RuntimeError) << "the relu kernel did not launch: " << err;
}
#endif

}  // namespace

#ifdef CPU_KERNEL
TVM_FFI_DLL_EXPORT_TYPED_FUNC(relu_cpu, relu_cpu);
#endif
#ifdef CUDA_KERNEL
TVM_FFI_DLL_EXPORT_TYPED_FUNC(relu_cuda, relu_cuda);
#endif
