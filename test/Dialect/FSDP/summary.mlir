// RUN: fsdp-opt %s --fsdp-summary -o /dev/null 2>&1 | FileCheck %s
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-summary -o /dev/null 2>&1 | FileCheck %s --check-prefix=TRAIN
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-lower-to-runtime --fsdp-summary -o /dev/null 2>&1 | FileCheck %s --check-prefix=LOWERED
// The summary changes nothing.
// RUN: fsdp-opt %s --fsdp-summary 2>/dev/null | FileCheck %s --check-prefix=IR

// CHECK:      fsdp-summary: 1 units, 3 parameters, 44 elements, 176 bytes
// CHECK-NEXT:   unit           params      elements         bytes  fwd  bwd kernels
// CHECK-NEXT:   @layers.0           2            40           160    1    0       0
// CHECK-NEXT:   (no unit)           1             4            16
// CHECK-NEXT:   func @forward: 7 ops

// Once @train_step exists, its regions are the ones counted.
// TRAIN:        @layers.0           2            40           160    1    1       0
// TRAIN:        func @train_step:

// After lowering, kernel calls are counted by unit.
// LOWERED:      @layers.0           2            40           160    0    0       3

// IR: fsdp.unit @layers.0 params [@layers.0.w, @layers.0.b]

fsdp.param @layers.0.w : tensor<4x9xf32> init <normal, std = 0.5>
fsdp.param @layers.0.b : tensor<4xf32> init <zeros> no_weight_decay
fsdp.param @scale : tensor<4xf32> init <ones> no_weight_decay
fsdp.unit @layers.0 params [@layers.0.w, @layers.0.b]
func.func @forward(%x: tensor<2x9xf32>, %t: tensor<2xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %0 = fsdp.compute @layers.0 forward ins(%x : tensor<2x9xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x9xf32>):
    %w = fsdp.load @layers.0.w : tensor<4x9xf32>
    %b = fsdp.load @layers.0.b : tensor<4xf32>
    %y = fsdp.linear %a, %w, %b : (tensor<2x9xf32>, tensor<4x9xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    fsdp.yield %y : tensor<2x4xf32>
  }
  %l = fsdp.cross_entropy %0, %t : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
