// relu on the CPU: out[i] = x[i] < 0 ? 0 : x[i] (NaN stays NaN, as in torch.relu).
#include <cstdint>

#include "relu_kernels.h"

namespace {
template <typename T>
void relu(T *out, const T *x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = x[i] < T(0) ? T(0) : x[i];
  }
}
}  // namespace

void relu_cpu_f32(float *out, const float *x, int64_t n) { relu(out, x, n); }
void relu_cpu_f64(double *out, const double *x, int64_t n) { relu(out, x, n); }
