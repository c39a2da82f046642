// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-remat=policy=full | FileCheck %s --check-prefix=FULL
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-remat=policy=selective | FileCheck %s --check-prefix=SEL
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-remat="policy=full overrides=c=none" | FileCheck %s --check-prefix=OVR
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-remat="overrides=*=full,c=none" | FileCheck %s --check-prefix=OVR
// RUN: fsdp-opt %s --fsdp-autodiff | fsdp-opt --fsdp-remat | FileCheck %s --check-prefix=NONE
// RUN: not fsdp-opt %s --fsdp-autodiff --fsdp-remat=policy=some 2>&1 | FileCheck %s --check-prefix=BADPOLICY
// RUN: not fsdp-opt %s --fsdp-autodiff --fsdp-remat=overrides=b 2>&1 | FileCheck %s --check-prefix=BADOVR
// RUN: not fsdp-opt %s --fsdp-remat 2>&1 | FileCheck %s --check-prefix=NOSTEP

// Unit @b computes linear -> gelu -> linear, unit @c gelu -> linear.
// Without recomputation @b's forward yields the first linear's output and
// the gelu's for its backward:
// NONE: fsdp.compute @b forward ins(%arg0 : tensor<4x8xf32>) -> tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>

// full: each forward yields only its output; each backward takes only its
// unit's input and recomputes the rest, from its own loads, right before
// the gradient op that first reads it.
// FULL-LABEL: func.func @train_step
// FULL: %[[B:.*]] = fsdp.compute @b forward ins(%arg0 : tensor<4x8xf32>) -> tensor<4x8xf32> {
// FULL: %[[C:.*]] = fsdp.compute @c forward ins(%[[B]] : tensor<4x8xf32>) -> tensor<4x4xf32> {
// FULL: fsdp.compute @c backward ins(%{{.*}}, %[[B]] : tensor<4x4xf32>, tensor<4x8xf32>)
// FULL-NEXT: ^bb0(%[[DY:.*]]: tensor<4x4xf32>, %[[IN:.*]]: tensor<4x8xf32>):
// FULL: %[[DX:.*]] = fsdp.linear_grad_input %[[DY]]
// FULL-NEXT: %[[G:.*]] = fsdp.gelu %[[IN]]
// FULL-NEXT: fsdp.linear_grad_weight %[[DY]], %[[G]]
// FULL-NEXT: fsdp.gelu_backward %[[DX]], %[[IN]]
// FULL: fsdp.compute @b backward ins(%{{.*}}, %arg0 : tensor<4x8xf32>, tensor<4x8xf32>)
// FULL-NEXT: ^bb0(%[[DY2:.*]]: tensor<4x8xf32>, %[[X:.*]]: tensor<4x8xf32>):
// FULL-DAG: %[[W2:.*]] = fsdp.load @b.w2
// FULL-DAG: %[[W1:.*]] = fsdp.load @b.w1
// FULL: %[[DG:.*]] = fsdp.linear_grad_input %[[DY2]], %[[W2]]
// FULL-NEXT: %[[H:.*]] = fsdp.linear %[[X]], %[[W1]]
// FULL-NEXT: %[[G2:.*]] = fsdp.gelu %[[H]]
// FULL-NEXT: fsdp.linear_grad_weight %[[DY2]], %[[G2]]
// FULL-NEXT: fsdp.gelu_backward %[[DG]], %[[H]]

// selective: the GEMM's output is kept (@b yields it next to its output),
// the gelu recomputed from it.
// SEL-LABEL: func.func @train_step
// SEL: %[[B:.*]]:2 = fsdp.compute @b forward ins(%arg0 : tensor<4x8xf32>) -> tensor<4x8xf32>, tensor<4x8xf32> {
// SEL: fsdp.compute @b backward ins(%{{.*}}, %[[B]]#0, %arg0 :
// SEL-NEXT: ^bb0(%[[DY:.*]]: tensor<4x8xf32>, %[[H:.*]]: tensor<4x8xf32>, %{{.*}}: tensor<4x8xf32>):
// SEL-NOT: fsdp.linear %
// SEL: %[[G:.*]] = fsdp.gelu %[[H]]
// SEL-NEXT: fsdp.linear_grad_weight %[[DY]], %[[G]]

// An override per unit (the last match wins): @c saves its gelu again.
// OVR-LABEL: func.func @train_step
// OVR: fsdp.compute @b forward ins(%arg0 : tensor<4x8xf32>) -> tensor<4x8xf32> {
// OVR: fsdp.compute @c forward ins(%{{.*}} : tensor<4x8xf32>) -> tensor<4x8xf32>, tensor<4x4xf32> {

// BADPOLICY: fsdp-remat: policy must be none, full or selective, got 'some'
// BADOVR: fsdp-remat: override 'b' is not UNIT-PATTERN=none|full|selective
// NOSTEP: fsdp-remat: no @train_step (run --fsdp-autodiff first)

module {
  fsdp.param @b.w1 : tensor<8x8xf32> init <normal, std = 2.000000e-02>
  fsdp.param @b.w2 : tensor<8x8xf32> init <normal, std = 2.000000e-02>
  fsdp.param @c.w : tensor<4x8xf32> init <normal, std = 2.000000e-02>
  fsdp.unit @b params [@b.w1, @b.w2]
  fsdp.unit @c params [@c.w]
  func.func @forward(%x: tensor<4x8xf32>, %t: tensor<4xi32>) -> tensor<f32> attributes {fsdp.forward} {
    %0 = fsdp.compute @b forward ins(%x : tensor<4x8xf32>) -> tensor<4x8xf32> {
    ^bb0(%a: tensor<4x8xf32>):
      %w1 = fsdp.load @b.w1 : tensor<8x8xf32>
      %w2 = fsdp.load @b.w2 : tensor<8x8xf32>
      %h = fsdp.linear %a, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
      %g = fsdp.gelu %h : tensor<4x8xf32>
      %y = fsdp.linear %g, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
      fsdp.yield %y : tensor<4x8xf32>
    }
    %1 = fsdp.compute @c forward ins(%0 : tensor<4x8xf32>) -> tensor<4x4xf32> {
    ^bb0(%a: tensor<4x8xf32>):
      %w = fsdp.load @c.w : tensor<4x8xf32>
      %g = fsdp.gelu %a : tensor<4x8xf32>
      %y = fsdp.linear %g, %w : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x4xf32>
      fsdp.yield %y : tensor<4x4xf32>
    }
    %l = fsdp.cross_entropy %1, %t : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
