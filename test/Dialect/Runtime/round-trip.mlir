// RUN: fsdp-opt %s | fsdp-opt | FileCheck %s
// RUN: fsdp-opt %s --mlir-print-op-generic | fsdp-opt | FileCheck %s

fsdp.param @w : tensor<3x4xf32> init <zeros>
// CHECK-LABEL: func.func @train_step
func.func @train_step() -> memref<f32> attributes {fsdprt.program} {
  // CHECK: fsdprt.buffer <input> input 0 offset 0 : memref<2x4xf32>
  %x = fsdprt.buffer <input> input 0 offset 0 : memref<2x4xf32>
  // CHECK: fsdprt.buffer <input> input 1 : memref<2xi32>
  %t = fsdprt.buffer <input> input 1 : memref<2xi32>
  // CHECK: fsdprt.buffer <param> param @w : memref<3x4xf32>
  %w = fsdprt.buffer <param> param @w : memref<3x4xf32>
  // CHECK: fsdprt.buffer <adam_m> param @w : memref<3x4xf32>
  %m = fsdprt.buffer <adam_m> param @w : memref<3x4xf32>
  // CHECK: fsdprt.buffer <adam_v> param @w : memref<3x4xf32>
  %v = fsdprt.buffer <adam_v> param @w : memref<3x4xf32>
  // CHECK: fsdprt.buffer <grad> : memref<3x4xf32>
  %g = fsdprt.buffer <grad> : memref<3x4xf32>
  // CHECK: fsdprt.buffer <scratch> : memref<16xf32>
  %s = fsdprt.buffer <scratch> : memref<16xf32>
  // CHECK: fsdprt.buffer <activation> offset 128 : memref<2x3xf32>
  %y = fsdprt.buffer <activation> offset 128 : memref<2x3xf32>
  %l = fsdprt.buffer <activation> : memref<f32>
  %rows = fsdprt.buffer <scratch> : memref<2xf32>
  // CHECK: fsdprt.kernel "linear" ins(%{{.*}}, %{{.*}} : memref<2x4xf32>, memref<3x4xf32>) outs(%{{.*}} : memref<2x3xf32>) unit "layers.0"
  fsdprt.kernel "linear" ins(%x, %w : memref<2x4xf32>, memref<3x4xf32>) outs(%y : memref<2x3xf32>) unit "layers.0"
  // CHECK: fsdprt.kernel "cross_entropy" ins(
  fsdprt.kernel "cross_entropy" ins(%y, %t : memref<2x3xf32>, memref<2xi32>) outs(%l, %rows : memref<f32>, memref<2xf32>)
  // CHECK-NEXT: fsdprt.eval_end
  fsdprt.eval_end
  // CHECK: fsdprt.kernel "fill" outs(%{{.*}} : memref<3x4xf32>) params {value = 0.000000e+00 : f32}
  fsdprt.kernel "fill" outs(%g : memref<3x4xf32>) params {value = 0.0 : f32}
  // CHECK: fsdprt.kernel "adamw" ins(%{{.*}} : memref<3x4xf32>) outs(%{{.*}}, %{{.*}}, %{{.*}} : memref<3x4xf32>, memref<3x4xf32>, memref<3x4xf32>) params {beta1 = 0.899999976 : f32, beta2 = 0.949999988 : f32, eps = 9.99999993E-9 : f32, lr = 1.000000e-03 : f32, weight_decay = 0.000000e+00 : f32}
  fsdprt.kernel "adamw" ins(%g : memref<3x4xf32>) outs(%w, %m, %v : memref<3x4xf32>, memref<3x4xf32>, memref<3x4xf32>) params {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32}
  return %l : memref<f32>
}
