// RUN: fsdp-opt %s --fsdp-lower-to-runtime | FileCheck %s
// A pack operand that is a view of another buffer than the pack's (here,
// of the gathered parameter) is copied into its slot; only a view of the
// pack's own buffer (a gradient the backward kernel wrote in place) is not.
// The pipeline never builds such a pack today, so only this test sees it.
module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2]>} {
  fsdp.param @w : tensor<3x4xf32> init <normal, std = 5.000000e-01>
  fsdp.param @b : tensor<3xf32> init <zeros> no_weight_decay
  fsdp.unit @layers.0 params [@w, @b]
  func.func @train_step(%x: tensor<1x4xf32>, %t: tensor<1xi32>, %s: i64) -> tensor<f32> attributes {fsdp.batch_split, fsdp.train_step} {
    %l = fsdp.cross_entropy %x, %t : (tensor<1x4xf32>, tensor<1xi32>) -> tensor<f32>
    %g = fsdp.all_gather @layers.0 : tensor<15xf32>
    %r:2 = fsdp.compute @layers.0 backward ins(%x, %g : tensor<1x4xf32>, tensor<15xf32>) -> tensor<3x4xf32>, tensor<3xf32> {
    ^bb0(%a: tensor<1x4xf32>, %p: tensor<15xf32>):
      %d = fsdp.view %p[0] : tensor<15xf32> -> tensor<1x3xf32>
      %gw = fsdp.linear_grad_weight %d, %a : (tensor<1x3xf32>, tensor<1x4xf32>) -> tensor<3x4xf32>
      %gb = fsdp.view %p[12] : tensor<15xf32> -> tensor<3xf32>
      fsdp.yield %gw, %gb : tensor<3x4xf32>, tensor<3xf32>
    }
    %f = fsdp.pack %r#0, %r#1 : (tensor<3x4xf32>, tensor<3xf32>) -> tensor<15xf32>
    %sh = fsdp.reduce_scatter %f @layers.0 : tensor<15xf32> -> tensor<8xf32>
    fsdp.free %f : tensor<15xf32>
    fsdp.free %g : tensor<15xf32>
    fsdp.adamw_shard @layers.0, %sh, %s {beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, lr = 1.0e-3 : f32, weight_decay = 0.0 : f32} : tensor<8xf32>
    return %l : tensor<f32>
  }
}
// CHECK: %[[G:.*]] = fsdprt.buffer <gathered>
// CHECK: fsdprt.kernel "all_gather" {{.*}} outs(%[[G]] : memref<15xf32>)
// The weight gradient is written in place into the pack: no copy.
// CHECK: fsdprt.kernel "linear_grad_weight"
// CHECK-NOT: fsdprt.kernel "copy"
// CHECK: %[[B:.*]] = fsdprt.view %[[G]][12] : memref<15xf32> -> memref<3xf32>
// CHECK-NEXT: %[[SLOT:.*]] = fsdprt.view %{{.*}}[12] : memref<15xf32> -> memref<3xf32>
// CHECK-NEXT: fsdprt.kernel "copy" ins(%[[B]] : memref<3xf32>) outs(%[[SLOT]] : memref<3xf32>)
// CHECK: fsdprt.kernel "reduce_scatter"
