#include <ATen/core/Tensor.h>
#include <ATen/mps/MPSStream.h>

#include <algorithm>

#import <Foundation/Foundation.h>
#import <Metal/Metal.h>

#include "../torch-ext/torch_binding.h"

// The build compiles relu.metal into a metallib and embeds it in a generated header, named
// by EMBEDDED_METALLIB_HEADER; its namespace, EMBEDDED_METALLIB_NAMESPACE, has createLibrary.
#ifdef EMBEDDED_METALLIB_HEADER
#include EMBEDDED_METALLIB_HEADER
#else
#error "EMBEDDED_METALLIB_HEADER is not defined: build this file with kernel-builder"
#endif

static inline id<MTLBuffer> buffer_of(const at::Tensor &t) {
  return __builtin_bit_cast(id<MTLBuffer>, t.storage().data());
}

static NSString *function_name(at::ScalarType dtype) {
  switch (dtype) {
  case at::ScalarType::Float:
    return @"relu_float";
  case at::ScalarType::Half:
    return @"relu_half";
  case at::ScalarType::BFloat16:
    return @"relu_bfloat";
  default:
    break;
  }
  TORCH_CHECK(false, "relu: unsupported dtype ", dtype, " (float32, float16, bfloat16)");
  return nil;
}

void relu(at::Tensor &out, const at::Tensor &x) {
  TORCH_CHECK(x.device().is_mps(), "relu: x must be an MPS tensor");
  relu_check(out, x);
  const NSUInteger n = static_cast<NSUInteger>(x.numel());
  if (n == 0) {
    return;
  }
  NSString *name = function_name(x.scalar_type());
  @autoreleasepool {
    at::mps::MPSStream *stream = at::mps::getCurrentMPSStream();
    id<MTLDevice> device = stream->device();
    NSError *error = nil;
    id<MTLLibrary> library = EMBEDDED_METALLIB_NAMESPACE::createLibrary(device, &error);
    TORCH_CHECK(library, "relu: cannot load the Metal library: ", error.localizedDescription.UTF8String);
    id<MTLFunction> function = [library newFunctionWithName:name];
    TORCH_CHECK(function, "relu: no Metal function ", name.UTF8String);
    id<MTLComputePipelineState> pipeline = [device newComputePipelineStateWithFunction:function error:&error];
    TORCH_CHECK(pipeline, "relu: cannot create the pipeline: ", error.localizedDescription.UTF8String);
    dispatch_sync(stream->queue(), ^() {
      id<MTLComputeCommandEncoder> encoder = stream->commandEncoder();
      [encoder setComputePipelineState:pipeline];
      [encoder setBuffer:buffer_of(x) offset:x.storage_offset() * x.element_size() atIndex:0];
      [encoder setBuffer:buffer_of(out) offset:out.storage_offset() * out.element_size() atIndex:1];
      const NSUInteger group = std::min<NSUInteger>(pipeline.maxTotalThreadsPerThreadgroup, n);
      [encoder dispatchThreads:MTLSizeMake(n, 1, 1) threadsPerThreadgroup:MTLSizeMake(group, 1, 1)];
    });
    stream->synchronize(at::mps::SyncType::COMMIT);
  }
}
