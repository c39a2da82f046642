// --fsdp-clip-grad on a sharded two-layer MLP (world size 2) with a unit the
// loss ignores (@unused, 5 elements: shards of 2 and 3, the shard tensors
// hold 3): one sum of squares per unit, chained in the order the units are
// reduced (@l1, @l0, then @unused, which fsdp-shard reduces where its AdamW
// was), one all-reduce, the coefficient, and every AdamW scaled by it after
// it.
// RUN: fsdp-opt %s --fsdp-mesh=shard=2 --fsdp-autodiff --fsdp-shard --fsdp-clip-grad=max-norm=0.5 --fsdp-verify | FileCheck %s
// CHECK-LABEL: func.func @train_step(
// CHECK:      %[[S1:.*]] = fsdp.reduce_scatter %{{.*}} @l1 : tensor<27xf32> -> tensor<14xf32>
// CHECK:      %[[S0:.*]] = fsdp.reduce_scatter %{{.*}} @l0 : tensor<40xf32> -> tensor<20xf32>
// CHECK:      %[[SU:.*]] = fsdp.reduce_scatter %{{.*}} @unused : tensor<5xf32> -> tensor<3xf32>
// CHECK-NEXT: fsdp.free
// CHECK-NEXT: %[[Q1:.*]] = fsdp.grad_sq_sum @l1, %[[S1]] : tensor<14xf32>
// CHECK-NEXT: %[[Q0:.*]] = fsdp.grad_sq_sum @l0, %[[S0]], %[[Q1]] : tensor<20xf32>
// CHECK-NEXT: %[[QU:.*]] = fsdp.grad_sq_sum @unused, %[[SU]], %[[Q0]] : tensor<3xf32>
// CHECK-NEXT: %[[SUM:.*]] = fsdp.all_reduce_sum %[[QU]] : tensor<f32>
// CHECK-NEXT: %[[C:.*]] = fsdp.clip_coefficient %[[SUM]] {max_norm = 5.000000e-01 : f32}
// CHECK-NEXT: fsdp.adamw_shard @l0, %[[S0]], %{{.*}} scale %[[C]] {{{.*}}} : tensor<20xf32>
// CHECK-NEXT: fsdp.adamw_shard @l1, %[[S1]], %{{.*}} scale %[[C]] {{{.*}}} : tensor<14xf32>
// CHECK-NEXT: fsdp.adamw_shard @unused, %[[SU]], %{{.*}} scale %[[C]] {{{.*}}} : tensor<3xf32>
// CHECK-NEXT: return

// Shards reduced in bf16: the sums and the AdamWs read the bf16 shards
// (both kernels widen them, exactly): no cast, no f32 copy of a shard.
// RUN: fsdp-opt %s --fsdp-mesh=shard=2 --fsdp-autodiff --fsdp-shard --fsdp-mixed-precision="param-dtype=bf16 reduce-dtype=bf16" --fsdp-clip-grad --fsdp-verify | FileCheck %s --check-prefix=BF16
// BF16:      %[[S1:.*]] = fsdp.reduce_scatter %{{.*}} @l1 : tensor<27xbf16> -> tensor<14xbf16>
// BF16:      %[[S0:.*]] = fsdp.reduce_scatter %{{.*}} @l0 : tensor<40xbf16> -> tensor<20xbf16>
// BF16:      %[[Q1:.*]] = fsdp.grad_sq_sum @l1, %[[S1]] : tensor<14xbf16>
// BF16-NEXT: %[[Q0:.*]] = fsdp.grad_sq_sum @l0, %[[S0]], %[[Q1]] : tensor<20xbf16>
// BF16-NEXT: %[[QU:.*]] = fsdp.grad_sq_sum @unused, %{{.*}}, %[[Q0]] : tensor<3xbf16>
// BF16-NEXT: %[[SUM:.*]] = fsdp.all_reduce_sum %[[QU]] : tensor<f32>
// BF16-NEXT: %[[C:.*]] = fsdp.clip_coefficient %[[SUM]] {max_norm = 1.000000e+00 : f32}
// BF16-NEXT: fsdp.adamw_shard @l0, %[[S0]], %{{.*}} scale %[[C]] {{{.*}}} : tensor<20xbf16>
// BF16-NEXT: fsdp.adamw_shard @l1, %[[S1]], %{{.*}} scale %[[C]] {{{.*}}} : tensor<14xbf16>
// BF16-NEXT: fsdp.adamw_shard @unused

// The schedule keeps each reduce-scatter's wait as late as without
// clipping: the first two wait before the next one starts, the last before
// its own sum, so the sums of the units reduced before it run while it is
// in flight. The all-reduce stays where it is, synchronous.
// RUN: fsdp-opt %s --fsdp-mesh=shard=2 --fsdp-autodiff --fsdp-shard --fsdp-clip-grad --fsdp-schedule --fsdp-verify | sed -n '/train_step/,$p' \
// RUN:   | grep -o -E 'fsdp\.(reduce_scatter_start|wait|adamw_shard|grad_sq_sum|all_reduce_sum|clip_coefficient|compute) [@%][a-z_.0-9]+( backward)?' \
// RUN:   | FileCheck %s --check-prefix=SCHED
// SCHED:      fsdp.compute @l1 backward
// SCHED-NEXT: fsdp.reduce_scatter_start
// SCHED-NEXT: fsdp.wait
// SCHED-NEXT: fsdp.compute @l0 backward
// SCHED-NEXT: fsdp.wait
// SCHED-NEXT: fsdp.reduce_scatter_start
// SCHED-NEXT: fsdp.wait
// SCHED-NEXT: fsdp.reduce_scatter_start
// SCHED-NEXT: fsdp.grad_sq_sum @l1
// SCHED-NEXT: fsdp.grad_sq_sum @l0
// SCHED-NEXT: fsdp.wait
// SCHED-NEXT: fsdp.grad_sq_sum @unused
// SCHED-NEXT: fsdp.all_reduce_sum
// SCHED-NEXT: fsdp.clip_coefficient
// SCHED-NEXT: fsdp.adamw_shard @l0
// SCHED-NEXT: fsdp.adamw_shard @l1
// SCHED-NEXT: fsdp.adamw_shard @unused

// Through the pipeline (grad-clip=0.5): the kernels, each sum with its
// unit's flat size and the GPU's partials, and the program returning the
// loss and the global sum of squares (so the planner keeps it to the end,
// where the runtime reads the norm). grad-clip=0 (the default) clips
// nothing; --fsdp-fit-memory's trial compiles clip too.
// RUN: fsdp-opt %s --fsdp-train-pipeline="world-size=2 grad-clip=0.5" | FileCheck %s --check-prefix=LOWER
// LOWER:      fsdprt.kernel "grad_sq_sum" ins(%{{.*}} : memref<14xf32>) outs(%[[Q1:.*]], %{{.*}} : memref<f32>, memref<512xf32>) params {flat_size = 27 : i64} unit "l1"
// LOWER-NEXT: fsdprt.kernel "grad_sq_sum" ins(%{{.*}}, %[[Q1]] : memref<20xf32>, memref<f32>) outs(%[[Q0:.*]], %{{.*}} : memref<f32>, memref<512xf32>) params {flat_size = 40 : i64} unit "l0"
// LOWER-NEXT: fsdprt.kernel "wait"
// LOWER-NEXT: fsdprt.kernel "grad_sq_sum" ins(%{{.*}}, %[[Q0]] : memref<3xf32>, memref<f32>) outs(%[[QU:.*]], %{{.*}} : memref<f32>, memref<512xf32>) params {flat_size = 5 : i64} unit "unused"
// LOWER-NEXT: fsdprt.kernel "all_reduce_sum" ins(%[[QU]] : memref<f32>) outs(%[[SUM:.*]] : memref<f32>)
// LOWER-NEXT: fsdprt.kernel "clip_coefficient" ins(%[[SUM]] : memref<f32>) outs(%[[C:.*]] : memref<f32>) params {max_norm = 5.000000e-01 : f32}
// LOWER-NEXT: fsdprt.kernel "adamw_shard" ins(%{{.*}}, %[[C]] : memref<20xf32>, memref<f32>)
// LOWER-NEXT: fsdprt.kernel "adamw_shard" ins(%{{.*}}, %[[C]] : memref<14xf32>, memref<f32>)
// LOWER-NEXT: fsdprt.kernel "adamw_shard" ins(%{{.*}}, %[[C]] : memref<3xf32>, memref<f32>)
// LOWER-NEXT: return %{{.*}}, %[[SUM]] : memref<f32>, memref<f32>
// RUN: fsdp-opt %s --fsdp-train-pipeline="world-size=2" | FileCheck %s --check-prefix=NOCLIP
// NOCLIP-NOT: grad_sq_sum
// NOCLIP-NOT: all_reduce_sum
// NOCLIP: return %{{.*}} : memref<f32>
// RUN: fsdp-opt %s --fsdp-train-pipeline="world-size=2 grad-clip=0.5 memory-budget=100000000" 2>/dev/null | FileCheck %s --check-prefix=FIT
// FIT-COUNT-3: fsdprt.kernel "grad_sq_sum"
// FIT-NEXT:    fsdprt.kernel "all_reduce_sum"
// FIT:         return %{{.*}}, %{{.*}} : memref<f32>, memref<f32>

// The simulator charges the all-reduce as a synchronous collective on the
// compute stream (lane 0): ib-400g's latency of 15 us, for 4 bytes.
// RUN: fsdp-opt %s --fsdp-mesh=shard=2 --fsdp-autodiff --fsdp-shard --fsdp-clip-grad --fsdp-schedule --fsdp-simulate="hardware=ib-400g trace=%t.trace.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=SIM
// SIM: fsdp-simulate: ib-400g, world size 2: step
// RUN: %python -c "import json, sys; e = [e for e in json.load(open(sys.argv[1]))['traceEvents'] if e.get('name') == 'all_reduce_sum']; assert len(e) == 1 and e[0]['tid'] == 0 and 15.0 <= e[0]['dur'] < 15.1, e" %t.trace.json

// Bucketed reduce-scatters are awaited together where the last one was,
// or earlier, where the first sum reads a shard of the bucket (here the
// three are one bucket).
// RUN: fsdp-opt %s --fsdp-mesh=shard=2 --fsdp-autodiff --fsdp-shard --fsdp-clip-grad --fsdp-schedule=bucket-bytes=100000 --fsdp-verify | sed -n '/train_step/,$p' \
// RUN:   | grep -o -E 'fsdp\.(reduce_scatter_start|wait|grad_sq_sum|all_reduce_sum) [@%][a-z_.0-9]+' \
// RUN:   | FileCheck %s --check-prefix=BUCKET
// BUCKET:      fsdp.reduce_scatter_start
// BUCKET-NEXT: fsdp.reduce_scatter_start
// BUCKET-NEXT: fsdp.reduce_scatter_start
// BUCKET-NEXT: fsdp.wait
// BUCKET-NEXT: fsdp.wait
// BUCKET-NEXT: fsdp.wait
// BUCKET-NEXT: fsdp.grad_sq_sum @l1
fsdp.param @l0.w : tensor<8x4xf32> init <normal, std = 0.5>
fsdp.param @l0.b : tensor<8xf32> init <zeros> no_weight_decay
fsdp.param @l1.w : tensor<3x8xf32> init <normal, std = 0.5>
fsdp.param @l1.b : tensor<3xf32> init <zeros> no_weight_decay
fsdp.param @unused.w : tensor<5xf32> init <zeros> no_weight_decay
fsdp.unit @l0 params [@l0.w, @l0.b]
fsdp.unit @l1 params [@l1.w, @l1.b]
fsdp.unit @unused params [@unused.w]
func.func @forward(%x: tensor<2x4xf32>, %t: tensor<2xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %0 = fsdp.compute @l0 forward ins(%x : tensor<2x4xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x4xf32>):
    %w = fsdp.load @l0.w : tensor<8x4xf32>
    %b = fsdp.load @l0.b : tensor<8xf32>
    %y = fsdp.linear %a, %w, %b : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    fsdp.yield %y : tensor<2x8xf32>
  }
  %1 = fsdp.relu %0 : tensor<2x8xf32>
  %2 = fsdp.compute @l1 forward ins(%1 : tensor<2x8xf32>) -> tensor<2x3xf32> {
  ^bb0(%a: tensor<2x8xf32>):
    %w = fsdp.load @l1.w : tensor<3x8xf32>
    %b = fsdp.load @l1.b : tensor<3xf32>
    %y = fsdp.linear %a, %w, %b : (tensor<2x8xf32>, tensor<3x8xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    fsdp.yield %y : tensor<2x3xf32>
  }
  %3 = fsdp.cross_entropy %2, %t : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
  return %3 : tensor<f32>
}
