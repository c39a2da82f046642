// Sums of sizes that each fit but together overflow int64: two units of
// 2^62 bytes each (the big.* parameters, which the loss ignores), beside a
// small layer. Each pass that adds them up says so, once, at the file,
// and fails; nothing wraps around into a negative or tiny size.
// RUN: not fsdp-opt %s --fsdp-summary -o /dev/null 2>&1 | FileCheck %s --check-prefix=SUMMARY
// RUN: not fsdp-opt %s --fsdp-autodiff --fsdp-shard --fsdp-memory-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT
// RUN: not fsdp-opt %s --fsdp-autodiff --fsdp-shard --fsdp-schedule=memory-budget=1000 -o /dev/null 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// RUN: not fsdp-opt %s --fsdp-autodiff --fsdp-shard --fsdp-schedule --fsdp-simulate -o /dev/null 2>&1 | FileCheck %s --check-prefix=SIMULATE
// RUN: rm -f %t.plan
// RUN: not fsdp-opt %s --fsdp-train-pipeline -o %t.plan 2>&1 | FileCheck %s --check-prefix=PLAN
// RUN: not test -e %t.plan
// At two ranks the shards fit; the totals over both ranks do not.
// RUN: not fsdp-opt %s --fsdp-mesh=shard=2 --fsdp-autodiff --fsdp-shard --fsdp-memory-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=RANKS

// SUMMARY: sizes-totals.mlir:{{[0-9]+}}:{{[0-9]+}}: error: fsdp-summary: the parameters would take more than 9223372036854775807 bytes, the most the compiler can count (int64)
// REPORT: sizes-totals.mlir:{{[0-9]+}}:{{[0-9]+}}: error: fsdp-memory-report: a rank's parameter shards would take more than 9223372036854775807 bytes, the most the compiler can count (int64)
// SCHEDULE: sizes-totals.mlir:{{[0-9]+}}:{{[0-9]+}}: error: fsdp-schedule: a rank's parameter shards would take more than 9223372036854775807 bytes
// SIMULATE: sizes-totals.mlir:{{[0-9]+}}:{{[0-9]+}}: error: fsdp-simulate: a rank's parameter shards would take more than 9223372036854775807 bytes
// PLAN: sizes-totals.mlir:{{[0-9]+}}:{{[0-9]+}}: error: fsdp-plan-memory: the arena of @train_step would take more than 9223372036854775807 bytes, the most the compiler can count (int64)
// RANKS: sizes-totals.mlir:{{[0-9]+}}:{{[0-9]+}}: error: fsdp-memory-report: a rank's training state would take more than 9223372036854775807 bytes

fsdp.param @layers.0.w : tensor<4x9xf32> init <normal, std = 0.5>
fsdp.param @layers.0.b : tensor<4xf32> init <zeros> no_weight_decay
fsdp.param @big.0.w : tensor<1152921504606846976xf32> init <zeros> no_weight_decay
fsdp.param @big.1.w : tensor<1152921504606846976xf32> init <zeros> no_weight_decay
fsdp.unit @layers.0 params [@layers.0.w, @layers.0.b]
fsdp.unit @big.0 params [@big.0.w]
fsdp.unit @big.1 params [@big.1.w]
func.func @forward(%x: tensor<2x9xf32>, %t: tensor<2xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %0 = fsdp.compute @layers.0 forward ins(%x : tensor<2x9xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x9xf32>):
    %w = fsdp.load @layers.0.w : tensor<4x9xf32>
    %b = fsdp.load @layers.0.b : tensor<4xf32>
    %y = fsdp.linear %a, %w, %b : (tensor<2x9xf32>, tensor<4x9xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    fsdp.yield %y : tensor<2x4xf32>
  }
  %loss = fsdp.cross_entropy %0, %t : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
