#pragma once

#include <torch/csrc/stable/tensor.h>

// out = max(x, 0) element-wise (NaN stays NaN, as torch.relu). Both tensors must be
// contiguous and have the same shape, dtype and device. One definition per backend.
void relu(torch::stable::Tensor out, torch::stable::Tensor x);

// The checks every backend makes before computing.
void relu_check(const torch::stable::Tensor &out, const torch::stable::Tensor &x);
