// RUN: fsdp-opt %s --fsdp-lower-to-runtime | FileCheck %s
// A kernel parameter that the IR leaves out takes the kernel table's
// default (FSDPKernels.td, generated into KernelTable.inc): the op's
// DefaultValuedAttr (layer_norm's and rms_norm's epsilon, rope's theta
// and scaling parameters, attention's window: 0, none),
// or heads for kv_heads. Given ones are kept. The lowering has no case of
// its own for any of them.

// CHECK-LABEL: func.func @train_step
// CHECK: fsdprt.kernel "layer_norm" {{.*}} params {epsilon = 9.99999974E-6 : f32}
// CHECK: fsdprt.kernel "layer_norm" {{.*}} params {epsilon = 1.000000e-03 : f32}
// CHECK: fsdprt.kernel "rms_norm" {{.*}} params {epsilon = 9.99999997E-7 : f32}
// CHECK: fsdprt.kernel "attention" {{.*}} params {heads = 2 : i64, kv_heads = 2 : i64, window = 0 : i64}
// CHECK: fsdprt.kernel "attention_blocked" {{.*}} params {heads = 2 : i64, kv_heads = 2 : i64, window = 7 : i64}
// CHECK: fsdprt.kernel "rope" {{.*}} params {attention_factor = 1.000000e+00 : f64, correction_high = 0.000000e+00 : f64, correction_low = 0.000000e+00 : f64, factor = 1.000000e+00 : f64, heads = 2 : i64, high_freq_factor = 4.000000e+00 : f64, kv_heads = 2 : i64, low_freq_factor = 1.000000e+00 : f64, original_max_positions = 0 : i64, scaling = 0 : i64, theta = 1.000000e+04 : f32}
// CHECK: fsdprt.kernel "rope_backward" {{.*}} params {attention_factor = 1.000000e+00 : f64, correction_high = 0.000000e+00 : f64, correction_low = 0.000000e+00 : f64, factor = 1.000000e+00 : f64, heads = 4 : i64, high_freq_factor = 4.000000e+00 : f64, kv_heads = 1 : i64, low_freq_factor = 1.000000e+00 : f64, original_max_positions = 0 : i64, scaling = 0 : i64, theta = 5.000000e+05 : f32}
// rope's scaling enum is stored as its integer (2: llama3), the given
// values kept and the others at their defaults.
// CHECK: fsdprt.kernel "rope" {{.*}} params {attention_factor = 1.000000e+00 : f64, correction_high = 0.000000e+00 : f64, correction_low = 0.000000e+00 : f64, factor = 8.000000e+00 : f64, heads = 2 : i64, high_freq_factor = 4.000000e+00 : f64, kv_heads = 2 : i64, low_freq_factor = 1.000000e+00 : f64, original_max_positions = 8192 : i64, scaling = 2 : i64, theta = 5.000000e+05 : f32}
func.func @train_step(%x: tensor<1x4x8xf32>, %g: tensor<8xf32>,
                      %qkv: tensor<1x4x24xf32>, %t: tensor<1x4xi32>,
                      %step: i64) -> tensor<f32> attributes {fsdp.train_step} {
  %n, %mean, %rstd = fsdp.layer_norm %x, %g, %g : (tensor<1x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<1x4x8xf32>, tensor<1x4xf32>, tensor<1x4xf32>)
  %n2, %mean2, %rstd2 = fsdp.layer_norm %n, %g, %g {epsilon = 1.0e-3 : f32} : (tensor<1x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<1x4x8xf32>, tensor<1x4xf32>, tensor<1x4xf32>)
  %r, %rrstd = fsdp.rms_norm %n2, %g : (tensor<1x4x8xf32>, tensor<8xf32>) -> (tensor<1x4x8xf32>, tensor<1x4xf32>)
  %a, %p = fsdp.attention %qkv {heads = 2 : i64} : (tensor<1x4x24xf32>) -> (tensor<1x4x8xf32>, tensor<1x2x4x4xf32>)
  %b, %lse = fsdp.attention %qkv {heads = 2 : i64, impl = #fsdp.attention_impl<blocked>, window = 7 : i64} : (tensor<1x4x24xf32>) -> (tensor<1x4x8xf32>, tensor<1x2x4xf32>)
  %q = fsdp.rope %qkv {heads = 2 : i64} : (tensor<1x4x24xf32>) -> tensor<1x4x24xf32>
  %qb = fsdp.rope_backward %q {heads = 4 : i64, kv_heads = 1 : i64, theta = 5.0e5 : f32} : (tensor<1x4x24xf32>) -> tensor<1x4x24xf32>
  %q3 = fsdp.rope %qb {heads = 2 : i64, theta = 5.0e5 : f32, scaling = #fsdp.rope_scaling<llama3>, factor = 8.0, original_max_positions = 8192} : (tensor<1x4x24xf32>) -> tensor<1x4x24xf32>
  %s = fsdp.add %r, %a : tensor<1x4x8xf32>
  %s2 = fsdp.add %s, %b : tensor<1x4x8xf32>
  %l = fsdp.cross_entropy %s2, %t : (tensor<1x4x8xf32>, tensor<1x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
