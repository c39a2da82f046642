// RUN: fsdp-opt %s --fsdp-lower-to-runtime | FileCheck %s
// Collectives: a plain one runs in place (stream 0, token 0); a started one
// keeps its stream, gets a token, and its wait reads the collective's input
// and output so that the memory planner keeps both alive until then.
// RUN: fsdp-gen mlp --layers 1 --width 4 --in-features 4 --classes 3 --batch 2 > %t.mlp.mlir
// RUN: fsdp-opt %t.mlp.mlir --fsdp-mesh=shard=2 --fsdp-wrap --fsdp-data-parallel --fsdp-autodiff --fsdp-shard --fsdp-lower-to-runtime | FileCheck %s --check-prefix=SYNC
// RUN: fsdp-opt %t.mlp.mlir --fsdp-mesh=shard=2 --fsdp-wrap --fsdp-data-parallel --fsdp-autodiff --fsdp-shard --fsdp-schedule --fsdp-lower-to-runtime | FileCheck %s --check-prefix=ASYNC
// SYNC: %[[SHARD:.*]] = fsdprt.buffer <param> param @layers.0 : memref<8xf32>
// SYNC: fsdprt.kernel "all_gather" ins(%[[SHARD]] : memref<8xf32>) outs(%{{.*}} : memref<15xf32>) params {axis = 0 : i64, group = 0 : i64, stream = 0 : i64, token = 0 : i64} unit "layers.0"
// SYNC: fsdprt.kernel "reduce_scatter" ins(%{{.*}} : memref<15xf32>) outs(%{{.*}} : memref<8xf32>) params {axis = 0 : i64, group = 0 : i64, stream = 0 : i64, token = 0 : i64} unit "layers.0"
// SYNC-NOT: "wait"
// ASYNC: %[[SHARD:.*]] = fsdprt.buffer <param> param @layers.0 : memref<8xf32>
// ASYNC: fsdprt.kernel "all_gather" ins(%[[SHARD]] : memref<8xf32>) outs(%[[G1:.*]] : memref<15xf32>) params {axis = 0 : i64, group = 0 : i64, stream = 1 : i64, token = 1 : i64} unit "layers.0"
// ASYNC-NEXT: fsdprt.kernel "wait" ins(%[[SHARD]], %[[G1]] : memref<8xf32>, memref<15xf32>) params {token = 1 : i64} unit "layers.0"
// ASYNC: fsdprt.kernel "all_gather" ins(%[[SHARD]] : memref<8xf32>) outs(%[[G2:.*]] : memref<15xf32>) params {axis = 0 : i64, group = 0 : i64, stream = 1 : i64, token = 2 : i64} unit "layers.0"
// ASYNC-NEXT: fsdprt.kernel "wait" ins(%[[SHARD]], %[[G2]] : memref<8xf32>, memref<15xf32>) params {token = 2 : i64} unit "layers.0"
// ASYNC: fsdprt.kernel "reduce_scatter" ins(%[[FULL:.*]] : memref<15xf32>) outs(%[[GS:.*]] : memref<8xf32>) params {axis = 0 : i64, group = 0 : i64, stream = 2 : i64, token = 3 : i64} unit "layers.0"
// ASYNC-NEXT: fsdprt.kernel "wait" ins(%[[FULL]], %[[GS]] : memref<15xf32>, memref<8xf32>) params {token = 3 : i64} unit "layers.0"
// ASYNC: fsdprt.kernel "adamw_shard" ins(%[[GS]] : memref<8xf32>)
// Mixed precision at a shard group of one: the unit's bf16 shard copy is
// a buffer of its own, which the regions read in place (no gather) and
// AdamW writes as its fourth output.
// RUN: fsdp-opt %t.mlp.mlir --fsdp-mesh=shard=1 --fsdp-wrap --fsdp-data-parallel --fsdp-autodiff --fsdp-shard --fsdp-mixed-precision=param-dtype=bf16 --fsdp-schedule --fsdp-lower-to-runtime | FileCheck %s --check-prefix=COPY
// COPY: %[[SHARD:.*]] = fsdprt.buffer <param> param @layers.0 : memref<15xf32>
// COPY: %[[COPY:.*]] = fsdprt.buffer <shard_copy> param @layers.0 : memref<15xbf16>
// COPY-NOT: "all_gather"
// COPY: %[[W:.*]] = fsdprt.view %[[COPY]][0] : memref<15xbf16> -> memref<3x4xbf16>
// COPY: fsdprt.kernel "linear" ins(%{{.*}}, %[[W]], %{{.*}} : memref<2x4xbf16>, memref<3x4xbf16>, memref<3xbf16>)
// COPY: fsdprt.kernel "adamw_shard" ins(%{{.*}} : memref<15xbf16>) outs(%[[SHARD]], %{{.*}}, %{{.*}}, %[[COPY]] : memref<15xf32>, memref<15xf32>, memref<15xf32>, memref<15xbf16>)

// A one-layer classifier's training step, as --fsdp-autodiff builds it.
fsdp.param @w : tensor<3x4xf32> init <normal, std = 0.5>
fsdp.param @b : tensor<3xf32> init <zeros> no_weight_decay
fsdp.unit @layers.0 params [@w, @b]

// The graph-level functions are gone; parameters and units stay.
// CHECK: fsdp.param @w
// CHECK: fsdp.unit @layers.0
// CHECK-NOT: func.func @forward
// What the runtime will hold outside the arena, per backend, rides along,
// and the model FLOPs of the step: three times the forward's one linear,
// 3 x 2 x (2 x 3 x 4) = 144 (the backward's two GEMMs are not counted
// again: they are the "three times").
// CHECK-LABEL: func.func @train_step() -> memref<f32> attributes {fsdprt.model_flops = 1.440000e+02 : f64, fsdprt.outside_arena = {cpu = {{[0-9]+}} : i64, cpu_blas_thread = {{[0-9]+}} : i64, cpu_mapped = {{[0-9]+}} : i64, cuda = {{[0-9]+}} : i64}, fsdprt.program}
// Inputs (the step number is not a buffer), then parameters.
// CHECK-NEXT: %[[X:.*]] = fsdprt.buffer <input> input 0 : memref<2x4xf32>
// CHECK-NEXT: %[[T:.*]] = fsdprt.buffer <input> input 1 : memref<2xi32>
// CHECK-NEXT: %[[W:.*]] = fsdprt.buffer <param> param @w : memref<3x4xf32>
// CHECK-NEXT: %[[B:.*]] = fsdprt.buffer <param> param @b : memref<3xf32>
// CHECK-NEXT: %[[Y:.*]] = fsdprt.buffer <activation> : memref<2x3xf32>
// CHECK-NEXT: %[[L:.*]] = fsdprt.buffer <activation> : memref<f32>
// The cross-entropy's per-row losses: scratch.
// CHECK-NEXT: %[[ROWS:.*]] = fsdprt.buffer <scratch> : memref<2xf32>
// CHECK-NEXT: %[[ONE:.*]] = fsdprt.buffer <activation> : memref<f32>
// CHECK-NEXT: %[[DY:.*]] = fsdprt.buffer <activation> : memref<2x3xf32>
// Gradients that AdamW consumes are <grad> buffers.
// CHECK-NEXT: %[[GW:.*]] = fsdprt.buffer <grad> : memref<3x4xf32>
// CHECK-NEXT: %[[GB:.*]] = fsdprt.buffer <grad> : memref<3xf32>
// CHECK-NEXT: %[[MW:.*]] = fsdprt.buffer <adam_m> param @w : memref<3x4xf32>
// CHECK-NEXT: %[[VW:.*]] = fsdprt.buffer <adam_v> param @w : memref<3x4xf32>
// CHECK-NEXT: %[[MB:.*]] = fsdprt.buffer <adam_m> param @b : memref<3xf32>
// CHECK-NEXT: %[[VB:.*]] = fsdprt.buffer <adam_v> param @b : memref<3xf32>
// Kernels in program order; a load is no copy: the kernel reads @w's buffer.
// CHECK-NEXT: fsdprt.kernel "linear" ins(%[[X]], %[[W]], %[[B]] : {{.*}}) outs(%[[Y]] : memref<2x3xf32>) unit "layers.0"
// CHECK-NEXT: fsdprt.kernel "cross_entropy" ins(%[[Y]], %[[T]] : {{.*}}) outs(%[[L]], %[[ROWS]] : memref<f32>, memref<2xf32>)
// The evaluation step (the forward and the loss) ends after the loss's
// last writer.
// CHECK-NEXT: fsdprt.eval_end
// CHECK-NEXT: fsdprt.kernel "fill" outs(%[[ONE]] : memref<f32>) params {value = 1.000000e+00 : f32}
// CHECK-NEXT: fsdprt.kernel "cross_entropy_backward" ins(%[[ONE]], %[[Y]], %[[T]] : {{.*}}) outs(%[[DY]] : memref<2x3xf32>)
// CHECK-NEXT: fsdprt.kernel "linear_grad_weight" ins(%[[DY]], %[[X]] : {{.*}}) outs(%[[GW]] : memref<3x4xf32>) unit "layers.0"
// CHECK-NEXT: fsdprt.kernel "bias_grad" ins(%[[DY]] : {{.*}}) outs(%[[GB]] : memref<3xf32>) unit "layers.0"
// CHECK-NEXT: fsdprt.kernel "adamw" ins(%[[GW]] : memref<3x4xf32>) outs(%[[W]], %[[MW]], %[[VW]] : {{.*}}) params {beta1 = 0.899999976 : f32, beta2 = 0.949999988 : f32, eps = 9.99999993E-9 : f32, lr = 3.000000e-04 : f32, weight_decay = 1.000000e-01 : f32}
// CHECK-NEXT: fsdprt.kernel "adamw" ins(%[[GB]] : memref<3xf32>) outs(%[[B]], %[[MB]], %[[VB]] : {{.*}}) params {{{.*}}weight_decay = 0.000000e+00 : f32}
// CHECK-NEXT: return %[[L]] : memref<f32>

func.func @forward(%x: tensor<2x4xf32>, %t: tensor<2xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %l = fsdp.compute @layers.0 forward ins(%x, %t : tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32> {
  ^bb0(%a: tensor<2x4xf32>, %b: tensor<2xi32>):
    %w = fsdp.load @w : tensor<3x4xf32>
    %bias = fsdp.load @b : tensor<3xf32>
    %y = fsdp.linear %a, %w, %bias : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %z = fsdp.cross_entropy %y, %b : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
    fsdp.yield %z : tensor<f32>
  }
  return %l : tensor<f32>
}

func.func @train_step(%x: tensor<2x4xf32>, %t: tensor<2xi32>, %step: i64) -> tensor<f32> attributes {fsdp.train_step} {
  %y = fsdp.compute @layers.0 forward ins(%x : tensor<2x4xf32>) -> tensor<2x3xf32> {
  ^bb0(%a: tensor<2x4xf32>):
    %w = fsdp.load @w : tensor<3x4xf32>
    %b = fsdp.load @b : tensor<3xf32>
    %0 = fsdp.linear %a, %w, %b : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    fsdp.yield %0 : tensor<2x3xf32>
  }
  %l = fsdp.cross_entropy %y, %t : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %dy = fsdp.cross_entropy_backward %one, %y, %t : (tensor<f32>, tensor<2x3xf32>, tensor<2xi32>) -> tensor<2x3xf32>
  %g:2 = fsdp.compute @layers.0 backward ins(%dy, %x : tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<3x4xf32>, tensor<3xf32> {
  ^bb0(%d: tensor<2x3xf32>, %a: tensor<2x4xf32>):
    %gw = fsdp.linear_grad_weight %d, %a : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<3x4xf32>
    %gb = fsdp.bias_grad %d : (tensor<2x3xf32>) -> tensor<3xf32>
    fsdp.yield %gw, %gb : tensor<3x4xf32>, tensor<3xf32>
  }
  fsdp.adamw @w, %g#0, %step {lr = 3.0e-4 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.1 : f32} : tensor<3x4xf32>
  fsdp.adamw @b, %g#1, %step {lr = 3.0e-4 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<3xf32>
  return %l : tensor<f32>
}
