#include <metal_stdlib>

using namespace metal;

// out = max(x, 0), one thread per element (NaN stays NaN).
template <typename T>
kernel void relu_kernel(device const T *x [[buffer(0)]], device T *out [[buffer(1)]],
                        uint index [[thread_position_in_grid]]) {
  out[index] = x[index] < T(0) ? T(0) : x[index];
}

template [[host_name("relu_float")]] kernel void relu_kernel<float>(device const float *, device float *, uint);
template [[host_name("relu_half")]] kernel void relu_kernel<half>(device const half *, device half *, uint);
template [[host_name("relu_bfloat")]] kernel void relu_kernel<bfloat>(device const bfloat *, device bfloat *, uint);
