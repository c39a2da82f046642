// Units the loss does not depend on (@unused.*) have no backward region:
// fsdp-shard reduces their zero gradient where their AdamW is, after the
// first unit's optimizer step. Their reduce-scatters are still waited for
// after they start and before their shard is read, and the one of the
// unit before them before that unit's shard is read. (A global batch of
// 4: schedule-grid.test also compiles it at 2x2 ranks.)
// RUN: fsdp-opt %s --fsdp-train-pipeline=world-size=2 -o /dev/null
// RUN: fsdp-opt %s --fsdp-mesh=shard=2 --fsdp-autodiff --fsdp-shard --fsdp-schedule --fsdp-verify | sed -n '/train_step/,$p' \
// RUN:   | grep -o -E 'fsdp\.(reduce_scatter_start|wait|adamw_shard) [@%][a-z_.0-9]+' \
// RUN:   | FileCheck %s

// CHECK:      fsdp.reduce_scatter_start
// CHECK-NEXT: fsdp.wait
// CHECK-NEXT: fsdp.adamw_shard @layers.0
// CHECK-NEXT: fsdp.reduce_scatter_start
// CHECK-NEXT: fsdp.wait
// CHECK-NEXT: fsdp.adamw_shard @unused.0
// CHECK-NEXT: fsdp.reduce_scatter_start
// CHECK-NEXT: fsdp.wait
// CHECK-NEXT: fsdp.adamw_shard @unused.1

fsdp.param @layers.0.w : tensor<4x9xf32> init <normal, std = 0.5>
fsdp.param @layers.0.b : tensor<4xf32> init <zeros> no_weight_decay
fsdp.param @unused.0.w : tensor<4xf32> init <zeros> no_weight_decay
fsdp.param @unused.1.w : tensor<4xf32> init <zeros> no_weight_decay
fsdp.unit @layers.0 params [@layers.0.w, @layers.0.b]
fsdp.unit @unused.0 params [@unused.0.w]
fsdp.unit @unused.1 params [@unused.1.w]
func.func @forward(%x: tensor<4x9xf32>, %t: tensor<4xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %0 = fsdp.compute @layers.0 forward ins(%x : tensor<4x9xf32>) -> tensor<4x4xf32> {
  ^bb0(%a: tensor<4x9xf32>):
    %w = fsdp.load @layers.0.w : tensor<4x9xf32>
    %b = fsdp.load @layers.0.b : tensor<4xf32>
    %y = fsdp.linear %a, %w, %b : (tensor<4x9xf32>, tensor<4x9xf32>, tensor<4xf32>) -> tensor<4x4xf32>
    fsdp.yield %y : tensor<4x4xf32>
  }
  %loss = fsdp.cross_entropy %0, %t : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
