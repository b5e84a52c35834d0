#pragma once

#include <torch/torch.h>

// out = x + y, element-wise. All three tensors must be contiguous and have the same shape,
// dtype and device. One definition per backend: {{python_name}}_<backend>/.
void {{python_name}}(torch::Tensor &out, torch::Tensor const &x, torch::Tensor const &y);
