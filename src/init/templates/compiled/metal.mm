#include <torch/torch.h>

#include <algorithm>

#import <Foundation/Foundation.h>
#import <Metal/Metal.h>

#include "../torch-ext/torch_binding.h"

// The build compiles {{python_name}}.metal into a metallib and embeds it in a generated header
// whose name it passes as EMBEDDED_METALLIB_HEADER; the header's namespace,
// EMBEDDED_METALLIB_NAMESPACE, provides `createLibrary`.
#ifdef EMBEDDED_METALLIB_HEADER
#include EMBEDDED_METALLIB_HEADER
#else
#error "EMBEDDED_METALLIB_HEADER is not defined: build this file with kernel-builder"
#endif

// The Metal buffer behind an MPS tensor's storage.
static inline id<MTLBuffer> buffer_of(const torch::Tensor &t) {
  return __builtin_bit_cast(id<MTLBuffer>, t.storage().data());
}

static NSString *function_name(at::ScalarType dtype) {
  switch (dtype) {
  case at::ScalarType::Float:
    return @"{{python_name}}_float";
  case at::ScalarType::Half:
    return @"{{python_name}}_half";
  case at::ScalarType::BFloat16:
    return @"{{python_name}}_bfloat";
  default:
    break;
  }
  TORCH_CHECK(false, "{{python_name}}: unsupported dtype ", dtype, " (float32, float16, bfloat16)");
  return nil;
}

void {{python_name}}(torch::Tensor &out, torch::Tensor const &x, torch::Tensor const &y) {
  TORCH_CHECK(x.device().is_mps(), "{{python_name}}: x must be an MPS tensor");
  TORCH_CHECK(y.device() == x.device() && out.device() == x.device(),
              "{{python_name}}: out, x and y must be on the same device");
  TORCH_CHECK(y.sizes() == x.sizes() && out.sizes() == x.sizes(),
              "{{python_name}}: out, x and y must have the same shape");
  TORCH_CHECK(y.scalar_type() == x.scalar_type() && out.scalar_type() == x.scalar_type(),
              "{{python_name}}: out, x and y must have the same dtype");
  TORCH_CHECK(x.is_contiguous() && y.is_contiguous() && out.is_contiguous(),
              "{{python_name}}: out, x and y must be contiguous");

  const NSUInteger n = static_cast<NSUInteger>(x.numel());
  if (n == 0) {
    return;
  }
  NSString *name = function_name(x.scalar_type());

  @autoreleasepool {
    id<MTLDevice> device = MTLCreateSystemDefaultDevice();
    NSError *error = nil;
    id<MTLLibrary> library = EMBEDDED_METALLIB_NAMESPACE::createLibrary(device, &error);
    TORCH_CHECK(library, "{{python_name}}: cannot load the Metal library: ",
                error.localizedDescription.UTF8String);
    id<MTLFunction> function = [library newFunctionWithName:name];
    TORCH_CHECK(function, "{{python_name}}: no Metal function ", name.UTF8String);
    id<MTLComputePipelineState> pipeline = [device newComputePipelineStateWithFunction:function
                                                                                 error:&error];
    TORCH_CHECK(pipeline, "{{python_name}}: cannot create the pipeline: ",
                error.localizedDescription.UTF8String);

    id<MTLCommandBuffer> command_buffer = torch::mps::get_command_buffer();
    dispatch_sync(torch::mps::get_dispatch_queue(), ^() {
      id<MTLComputeCommandEncoder> encoder = [command_buffer computeCommandEncoder];
      [encoder setComputePipelineState:pipeline];
      [encoder setBuffer:buffer_of(x) offset:x.storage_offset() * x.element_size() atIndex:0];
      [encoder setBuffer:buffer_of(y) offset:y.storage_offset() * y.element_size() atIndex:1];
      [encoder setBuffer:buffer_of(out) offset:out.storage_offset() * out.element_size() atIndex:2];
      const NSUInteger group = std::min<NSUInteger>(pipeline.maxTotalThreadsPerThreadgroup, n);
      [encoder dispatchThreads:MTLSizeMake(n, 1, 1) threadsPerThreadgroup:MTLSizeMake(group, 1, 1)];
      [encoder endEncoding];
      torch::mps::commit();
    });
  }
}
