// RUN: fsdp-opt %s --fsdp-mesh="shard=2 expert=2" --fsdp-wrap --fsdp-data-parallel --fsdp-expert-parallel | FileCheck %s
// Without an expert axis the pass changes nothing:
// RUN: fsdp-opt %s --fsdp-mesh="shard=2" --fsdp-wrap --fsdp-data-parallel --fsdp-expert-parallel | FileCheck %s --check-prefix=NONE
// Dropping past a capacity (0.75 T K = 5 rows of the 6 a rank sends):
// RUN: fsdp-opt %s --fsdp-mesh="shard=2 expert=2" --fsdp-wrap --fsdp-data-parallel --fsdp-expert-parallel="capacity-factor=0.75 overflow=drop" | FileCheck %s --check-prefix=DROP
// The whole step compiles and lowers with the exchanges in it:
// RUN: fsdp-opt %s --fsdp-train-pipeline="world-size=2 expert=2" --mlir-print-ir-after=fsdp-lower-to-runtime -o /dev/null 2>&1 | FileCheck %s --check-prefix=LOWERED
// RUN: fsdp-opt %s --fsdp-train-pipeline="world-size=2 expert=2 overlap-all-to-all=false" --mlir-print-ir-after=fsdp-lower-to-runtime -o /dev/null 2>&1 | FileCheck %s --check-prefix=INPLACE

// 4 experts over expert groups of 2 ranks: each rank holds 2 (rows 0-1 or
// 2-3 of every stacked weight) in a unit of their own; T = 3 tokens per
// rank choosing K = 2, so a rank receives at most G T min(K, L) = 12 rows.
// CHECK: module attributes {fsdp.mesh = #fsdp.mesh<["shard" = 2, "expert" = 2]>}
// CHECK: fsdp.param @w_router : tensor<4x6xf32>
// CHECK: fsdp.param @w_gate : tensor<2x8x6xf32>
// CHECK: fsdp.param @w_up : tensor<2x8x6xf32>
// CHECK: fsdp.param @w_down : tensor<2x6x8xf32>
// CHECK: fsdp.unit @root params [@w_in, @w_router, @w_out]
// CHECK: fsdp.unit @root.experts params [@w_gate, @w_up, @w_down] {expert_parallel}
// CHECK: fsdp.moe_sort {{.*}} -> (tensor<1x3x2xi32>, tensor<1x3x2xi32>, tensor<5xi32>)
// CHECK: %[[ROWS:.*]] = fsdp.moe_permute {{.*}} -> tensor<6x6xf32>
// CHECK: %[[COUNTS:.*]] = fsdp.moe_expert_counts %{{.*}} : (tensor<5xi32>) -> tensor<2x2xi32>
// CHECK: %[[RECV:.*]] = fsdp.all_to_all_counts %[[COUNTS]] over "expert" : tensor<2x2xi32> -> tensor<2x2xi32>
// CHECK: %[[IN:.*]] = fsdp.all_to_all %{{.*}}, %[[COUNTS]], %[[RECV]] over "expert" : (tensor<6x6xf32>, tensor<2x2xi32>, tensor<2x2xi32>) -> tensor<12x6xf32>
// CHECK: %[[OUT:.*]] = fsdp.compute @root.experts forward ins(%[[IN]], %[[RECV]] : tensor<12x6xf32>, tensor<2x2xi32>) -> tensor<12x6xf32>
// CHECK:   fsdp.load @w_gate : tensor<2x8x6xf32>
// CHECK:   %[[G:.*]] = fsdp.moe_regroup %{{.*}}, %{{.*}} : (tensor<12x6xf32>, tensor<2x2xi32>) -> tensor<12x6xf32>
// CHECK:   %[[LOCAL:.*]] = fsdp.moe_local_offsets %{{.*}} : (tensor<2x2xi32>) -> tensor<3xi32>
// CHECK:   fsdp.moe_grouped_linear %[[G]], %{{.*}}, %[[LOCAL]] {fsdp.active_rows = 6 : i64} : (tensor<12x6xf32>, tensor<2x8x6xf32>, tensor<3xi32>) -> tensor<12x8xf32>
// CHECK:   fsdp.swiglu {{.*}} -> tensor<12x8xf32>
// CHECK:   %[[Y:.*]] = fsdp.moe_grouped_linear {{.*}} -> tensor<12x6xf32>
// CHECK:   fsdp.moe_regroup %[[Y]], %{{.*}} {inverse = true} : (tensor<12x6xf32>, tensor<2x2xi32>) -> tensor<12x6xf32>
// CHECK: %[[HOME:.*]] = fsdp.all_to_all %[[OUT]], %[[RECV]], %[[COUNTS]] over "expert" : (tensor<12x6xf32>, tensor<2x2xi32>, tensor<2x2xi32>) -> tensor<6x6xf32>
// CHECK: fsdp.moe_combine %{{.*}}, %{{.*}}, %{{.*}} : (tensor<6x6xf32>
// The receiver cuts its counts to the capacity and tells the senders what
// it kept; only kept rows travel, packed, and come back into their runs
// (the dropped ones zero) before the combine.
// DROP: %[[COUNTS:.*]] = fsdp.moe_expert_counts
// DROP: %[[RECV:.*]] = fsdp.all_to_all_counts %[[COUNTS]] over "expert"
// DROP: %[[KEPT:.*]], %{{.*}} = fsdp.moe_capacity_trim %[[RECV]] {capacity = 5 : i64} : (tensor<2x2xi32>) -> (tensor<2x2xi32>, tensor<1xi32>)
// DROP: %[[SENT:.*]] = fsdp.all_to_all_counts %[[KEPT]] over "expert"
// DROP: %[[PACKED:.*]] = fsdp.moe_compact %{{.*}}, %[[COUNTS]], %[[SENT]] : (tensor<6x6xf32>, tensor<2x2xi32>, tensor<2x2xi32>) -> tensor<6x6xf32>
// DROP: fsdp.all_to_all %[[PACKED]], %[[SENT]], %[[KEPT]] over "expert" : {{.*}} -> tensor<5x6xf32>
// DROP: %[[BACK:.*]] = fsdp.all_to_all %{{.*}}, %[[KEPT]], %[[SENT]] over "expert" : (tensor<5x6xf32>, {{.*}}) -> tensor<6x6xf32>
// DROP: fsdp.moe_compact %[[BACK]], %[[COUNTS]], %[[SENT]] {inverse = true}
// DROP: fsdp.moe_combine
// NONE: fsdp.param @w_gate : tensor<4x8x6xf32>
// NONE-NOT: all_to_all
// NONE-NOT: expert_parallel

// The lowered step: the exchanges and their reverses in the backward, the
// expert unit's collectives over its expert shard group (axis 2), the
// others over the shard axis.
// LOWERED: fsdprt.kernel "all_gather" {{.*}} params {axis = 0 : i64{{.*}} unit "root"
// The row exchanges start on stream 4 and are waited for (the wait names
// the rows sent and received) before what reads them.
// LOWERED: fsdprt.kernel "all_to_all_counts" {{.*}} params {axis = 3 : i64}
// LOWERED: fsdprt.kernel "all_to_all" ins(%[[IN:[0-9]+]], {{.*}} outs(%[[OUT:[0-9]+]] : memref<12x6xf32>) params {axis = 3 : i64, group = 0 : i64, stream = 4 : i64, token = [[T:[0-9]+]] : i64}
// LOWERED: fsdprt.kernel "all_gather" {{.*}} params {axis = 2 : i64{{.*}} unit "root.experts"
// LOWERED: fsdprt.kernel "wait" ins(%[[IN]], %[[OUT]] : {{.*}}) params {token = [[T]] : i64}
// LOWERED: fsdprt.kernel "all_to_all" {{.*}} outs(%{{.*}} : memref<6x6xf32>) params {axis = 3 : i64, group = 0 : i64, stream = 4 : i64
// LOWERED: fsdprt.kernel "all_to_all" {{.*}} outs(%{{.*}} : memref<12x6xf32>) params {axis = 3 : i64, group = 0 : i64, stream = 4 : i64
// The experts' weight gradients run while their rows' gradients go home:
// the return starts before them, and the unit's reduce-scatter follows.
// LOWERED: fsdprt.kernel "all_to_all" {{.*}} outs(%{{.*}} : memref<6x6xf32>)
// LOWERED: fsdprt.kernel "moe_grouped_linear_grad_weight"
// LOWERED: fsdprt.kernel "reduce_scatter" {{.*}} params {axis = 2 : i64{{.*}} unit "root.experts"
// LOWERED: fsdprt.kernel "reduce_scatter" {{.*}} params {axis = 0 : i64{{.*}} unit "root"
// Without the overlap the exchanges run in place, on the compute stream:
// INPLACE: fsdprt.kernel "all_to_all" {{.*}} outs(%{{.*}} : memref<12x6xf32>) params {axis = 3 : i64, group = 0 : i64, stream = 0 : i64, token = 0 : i64}
// INPLACE-NOT: stream = 4

fsdp.param @w_in : tensor<6x6xf32> init <normal, std = 0.5>
fsdp.param @w_router : tensor<4x6xf32> init <normal, std = 1.0>
fsdp.param @w_gate : tensor<4x8x6xf32> init <normal, std = 0.8>
fsdp.param @w_up : tensor<4x8x6xf32> init <normal, std = 0.5>
fsdp.param @w_down : tensor<4x6x8xf32> init <normal, std = 0.5>
fsdp.param @w_out : tensor<5x6xf32> init <normal, std = 0.5>
func.func @forward(%x: tensor<2x3x6xf32>, %t: tensor<2x3xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %wi = fsdp.load @w_in : tensor<6x6xf32>
  %wr = fsdp.load @w_router : tensor<4x6xf32>
  %wg = fsdp.load @w_gate : tensor<4x8x6xf32>
  %wu = fsdp.load @w_up : tensor<4x8x6xf32>
  %wd = fsdp.load @w_down : tensor<4x6x8xf32>
  %wo = fsdp.load @w_out : tensor<5x6xf32>
  %h = fsdp.linear %x, %wi : (tensor<2x3x6xf32>, tensor<6x6xf32>) -> tensor<2x3x6xf32>
  %logits = fsdp.linear %h, %wr : (tensor<2x3x6xf32>, tensor<4x6xf32>) -> tensor<2x3x4xf32>
  %w, %e = fsdp.moe_router %logits : (tensor<2x3x4xf32>) -> (tensor<2x3x2xf32>, tensor<2x3x2xi32>)
  %order, %position, %offsets = fsdp.moe_sort %e {num_experts = 4} : (tensor<2x3x2xi32>) -> (tensor<2x3x2xi32>, tensor<2x3x2xi32>, tensor<5xi32>)
  %xs = fsdp.moe_permute %h, %order : (tensor<2x3x6xf32>, tensor<2x3x2xi32>) -> tensor<12x6xf32>
  %gate = fsdp.moe_grouped_linear %xs, %wg, %offsets : (tensor<12x6xf32>, tensor<4x8x6xf32>, tensor<5xi32>) -> tensor<12x8xf32>
  %up = fsdp.moe_grouped_linear %xs, %wu, %offsets : (tensor<12x6xf32>, tensor<4x8x6xf32>, tensor<5xi32>) -> tensor<12x8xf32>
  %a = fsdp.swiglu %gate, %up : (tensor<12x8xf32>, tensor<12x8xf32>) -> tensor<12x8xf32>
  %ys = fsdp.moe_grouped_linear %a, %wd, %offsets : (tensor<12x8xf32>, tensor<4x6x8xf32>, tensor<5xi32>) -> tensor<12x6xf32>
  %y = fsdp.moe_combine %ys, %w, %position : (tensor<12x6xf32>, tensor<2x3x2xf32>, tensor<2x3x2xi32>) -> tensor<2x3x6xf32>
  %r = fsdp.add %h, %y : tensor<2x3x6xf32>
  %o = fsdp.linear %r, %wo : (tensor<2x3x6xf32>, tensor<5x6xf32>) -> tensor<2x3x5xf32>
  %l = fsdp.cross_entropy %o, %t : (tensor<2x3x5xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
