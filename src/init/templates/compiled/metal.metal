#include <metal_stdlib>

using namespace metal;

// out = x + y, one thread per element.
template <typename T>
kernel void {{python_name}}_kernel(device const T *x [[buffer(0)]], device const T *y [[buffer(1)]],
                                   device T *out [[buffer(2)]], uint index [[thread_position_in_grid]]) {
  out[index] = x[index] + y[index];
}

template [[host_name("{{python_name}}_float")]] kernel void
{{python_name}}_kernel<float>(device const float *, device const float *, device float *, uint);
template [[host_name("{{python_name}}_half")]] kernel void
{{python_name}}_kernel<half>(device const half *, device const half *, device half *, uint);
template [[host_name("{{python_name}}_bfloat")]] kernel void
{{python_name}}_kernel<bfloat>(device const bfloat *, device const bfloat *, device bfloat *, uint);
