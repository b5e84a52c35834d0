#pragma once

#include <ATen/core/Tensor.h>

// out = max(x, 0) element-wise (NaN stays NaN, as torch.relu). Both tensors must be
// contiguous and have the same shape, dtype and device. One definition per backend.
void relu(at::Tensor &out, const at::Tensor &x);

// The checks every backend makes before computing.
void relu_check(const at::Tensor &out, const at::Tensor &x);
