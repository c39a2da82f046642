// The named pipeline runs mesh, wrap, data-parallel, autodiff, shard, schedule, verify,
// lower-to-runtime and plan-memory, forwarding its options.
// RUN: fsdp-opt %s --fsdp-train-pipeline | FileCheck %s
// RUN: fsdp-opt %s --fsdp-train-pipeline="policy=none lr=0.5 weight-decay=0.0" | FileCheck %s --check-prefix=OPTS
// The pipeline equals the passes run one by one, each with its own
// defaults (the pipeline's defaults are read from the passes' options).
// RUN: fsdp-opt %s --fsdp-train-pipeline > %t.pipeline
// RUN: fsdp-opt %s --fsdp-mesh --fsdp-wrap --fsdp-data-parallel --fsdp-autodiff --fsdp-shard --fsdp-schedule --fsdp-verify --fsdp-lower-to-runtime --fsdp-plan-memory > %t.passes
// RUN: diff %t.pipeline %t.passes
// And with options: world-size sets the mesh that every later pass reads.
// RUN: fsdp-opt %s --fsdp-train-pipeline="world-size=2 backward-prefetch=1 lr=0.5" > %t.pipeline2
// RUN: fsdp-opt %s --fsdp-mesh=shard=2 --fsdp-wrap --fsdp-data-parallel --fsdp-autodiff=lr=0.5 --fsdp-shard --fsdp-schedule=backward-prefetch=1 --fsdp-verify --fsdp-lower-to-runtime --fsdp-plan-memory > %t.passes2
// RUN: diff %t.pipeline2 %t.passes2

// CHECK: fsdp.unit @layers.0 params [@layers.0.w]
// CHECK: fsdp.unit @layers.1 params [@layers.1.w]
// At one rank the gathers and reduce-scatters are elided: the linears read
// views of the units' shards, the AdamWs the gradients in place.
// CHECK-LABEL: func.func @train_step() -> memref<f32> attributes {fsdprt.arena_size
// CHECK-NOT: "all_gather"
// CHECK: fsdprt.kernel "linear" {{.*}} unit "layers.0"
// CHECK: fsdprt.kernel "linear" {{.*}} unit "layers.1"
// CHECK: fsdprt.kernel "linear_grad_weight" {{.*}} unit "layers.1"
// CHECK-NOT: "reduce_scatter"
// CHECK: fsdprt.kernel "linear_grad_weight" {{.*}} unit "layers.0"
// CHECK: fsdprt.kernel "adamw_shard" {{.*}}lr = 3.000000e-04 : f32, weight_decay = 1.000000e-01 : f32} unit "layers.0"
// CHECK: fsdprt.kernel "adamw_shard" {{.*}} unit "layers.1"

// OPTS: fsdp.unit @root params [@layers.0.w, @layers.1.w]
// OPTS-LABEL: func.func @train_step
// OPTS: fsdprt.kernel "linear" {{.*}} unit "root"
// OPTS: fsdprt.kernel "adamw_shard" {{.*}}lr = 5.000000e-01 : f32, weight_decay = 0.000000e+00 : f32} unit "root"

fsdp.param @layers.0.w : tensor<8x4xf32> init <normal, std = 0.5>
fsdp.param @layers.1.w : tensor<3x8xf32> init <normal, std = 0.5>
func.func @forward(%x: tensor<2x4xf32>, %t: tensor<2xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %w0 = fsdp.load @layers.0.w : tensor<8x4xf32>
  %0 = fsdp.linear %x, %w0 : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
  %1 = fsdp.relu %0 : tensor<2x8xf32>
  %w1 = fsdp.load @layers.1.w : tensor<3x8xf32>
  %2 = fsdp.linear %1, %w1 : (tensor<2x8xf32>, tensor<3x8xf32>) -> tensor<2x3xf32>
  %3 = fsdp.cross_entropy %2, %t : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
  return %3 : tensor<f32>
}
