// RUN: fsdp-opt %s -split-input-file --fsdp-mesh=shard=2 --fsdp-autodiff --fsdp-shard --fsdp-mixed-precision=param-dtype=bf16 | FileCheck %s
// RUN: fsdp-opt %s -split-input-file --fsdp-mesh=shard=2 --fsdp-autodiff --fsdp-shard --fsdp-mixed-precision="param-dtype=bf16 reduce-dtype=bf16" | FileCheck %s --check-prefix=BF16RS
// RUN: fsdp-opt %s -split-input-file --fsdp-mesh=shard=2 --fsdp-autodiff --fsdp-shard --fsdp-mixed-precision=param-dtype=f32 | FileCheck %s --check-prefix=NOOP
// RUN: fsdp-opt %s -split-input-file --fsdp-mesh=shard=2 --fsdp-autodiff --fsdp-shard --fsdp-mixed-precision="param-dtype=bf16 reduce-dtype=bf16" --fsdp-schedule="forward-prefetch=1 backward-prefetch=1" --fsdp-verify | FileCheck %s --check-prefix=SCHED
// RUN: fsdp-opt %s -split-input-file --fsdp-mesh=shard=1 --fsdp-autodiff --fsdp-shard --fsdp-mixed-precision=param-dtype=bf16 | FileCheck %s --check-prefix=ONE
// RUN: fsdp-opt %s -split-input-file --fsdp-mesh=mesh=2x1 --fsdp-autodiff --fsdp-shard --fsdp-mixed-precision=param-dtype=bf16 | FileCheck %s --check-prefix=REPL
// RUN: fsdp-opt %s -split-input-file --fsdp-mesh=shard=1 --fsdp-autodiff --fsdp-shard --fsdp-mixed-precision="param-dtype=bf16 shard-copy=false" | FileCheck %s --check-prefix=NOCOPY
// RUN: fsdp-opt %s -split-input-file --fsdp-mesh=shard=1 --fsdp-autodiff --fsdp-shard --fsdp-mixed-precision=param-dtype=f32 | FileCheck %s --check-prefix=NOCOPY
// RUN: fsdp-gen gpt2 --layers 1 --dim 8 --heads 2 --vocab 16 --seq 4 --batch 2 | fsdp-opt --fsdp-mesh=shard=2 --fsdp-attention=impl=blocked --fsdp-autodiff --fsdp-shard --fsdp-mixed-precision=param-dtype=bf16 | FileCheck %s --check-prefix=GPT
// RUN: fsdp-gen gpt2 --layers 1 --dim 8 --heads 2 --vocab 16 --seq 4 --batch 2 | fsdp-opt --fsdp-mesh=shard=2 --fsdp-attention=impl=materialized --fsdp-autodiff --fsdp-shard --fsdp-mixed-precision=param-dtype=bf16 | FileCheck %s --check-prefix=PROBS

// GPT-2: statistics stay f32 (layer norm's mean and rstd, attention's
// log-sum-exp, the loss); activations and gradients are bf16, the tied
// token table's two gradients summed in bf16.
// GPT-LABEL: func.func @train_step(
// GPT:       fsdp.embedding %{{.*}} : (tensor<2x4xi32>, tensor<16x8xbf16>, tensor<4x8xbf16>) -> tensor<2x4x8xbf16>
// GPT:       fsdp.layer_norm %{{.*}} : (tensor<2x4x8xbf16>, tensor<8xbf16>, tensor<8xbf16>) -> (tensor<2x4x8xbf16>, tensor<2x4xf32>, tensor<2x4xf32>)
// GPT:       fsdp.attention %{{.*}} : (tensor<2x4x24xbf16>) -> (tensor<2x4x8xbf16>, tensor<2x2x4xf32>)
// GPT:       fsdp.cross_entropy %{{.*}} : (tensor<2x4x16xbf16>, tensor<2x4xi32>) -> tensor<f32>
// GPT:       fsdp.attention_backward %{{.*}} : (tensor<2x4x8xbf16>, tensor<2x4x24xbf16>, tensor<2x2x4xf32>, tensor<2x4x8xbf16>) -> tensor<2x4x24xbf16>
// GPT:       fsdp.embedding_backward %{{.*}} -> (tensor<16x8xbf16>, tensor<4x8xbf16>)
// GPT-NEXT:  fsdp.add %{{.*}}, %{{.*}} : tensor<16x8xbf16>
// GPT:       fsdp.cast %{{.*}} : tensor<176xbf16> -> tensor<176xf32>
// GPT:       fsdp.adamw_shard @root, %{{.*}} : tensor<88xf32>
// The materialized form's probabilities are an activation: bf16.
// PROBS:     fsdp.attention %{{.*}} : (tensor<2x4x24xbf16>) -> (tensor<2x4x8xbf16>, tensor<2x2x4x4xbf16>)

// A two-layer MLP with f32 inputs. Gathers give bf16, the compute runs in
// bf16 (the f32 input cast where the first linear reads it), the loss and
// the shards AdamW updates stay f32; each unit's bf16 gradient is cast to
// f32 before its reduce-scatter, and freed right after the cast.
fsdp.param @l0.w : tensor<8x4xf32> init <normal, std = 0.5>
fsdp.param @l0.b : tensor<8xf32> init <zeros> no_weight_decay
fsdp.param @l1.w : tensor<3x8xf32> init <normal, std = 0.5>
fsdp.param @l1.b : tensor<3xf32> init <zeros> no_weight_decay
fsdp.unit @l0 params [@l0.w, @l0.b]
// The pass decides the copies: one given with the module is dropped
// where the pass makes none.
fsdp.unit @l1 params [@l1.w, @l1.b] {shard_copy = bf16}

// Over two ranks the gathers round the shards: no unit keeps a copy.
// CHECK-NOT:  shard_copy
// At a shard group of one (replicas or not) each unit keeps its shard in
// bf16 too, which AdamW writes, and its gathers in bf16 are local copies
// of it; without shard-copy (or in f32) none does.
// ONE:        fsdp.unit @l0 params [@l0.w, @l0.b] {shard_copy = bf16}
// ONE-NEXT:   fsdp.unit @l1 params [@l1.w, @l1.b] {shard_copy = bf16}
// REPL:       fsdp.unit @l1 params [@l1.w, @l1.b] {shard_copy = bf16}
// NOCOPY-NOT: shard_copy

// CHECK-LABEL: func.func @train_step(
// CHECK:      %[[G0:.*]] = fsdp.all_gather @l0 : tensor<40xbf16>
// CHECK-NEXT: %[[H0:.*]] = fsdp.compute @l0 forward ins(%{{.*}}, %[[G0]] : tensor<2x4xf32>, tensor<40xbf16>) -> tensor<2x8xbf16> {
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<2x4xf32>, %[[P0:.*]]: tensor<40xbf16>):
// CHECK-NEXT:   %[[X16:.*]] = fsdp.cast %[[X]] : tensor<2x4xf32> -> tensor<2x4xbf16>
// CHECK-NEXT:   %[[W0:.*]] = fsdp.view %[[P0]][0] : tensor<40xbf16> -> tensor<8x4xbf16>
// CHECK-NEXT:   %[[B0:.*]] = fsdp.view %[[P0]][32] : tensor<40xbf16> -> tensor<8xbf16>
// CHECK-NEXT:   fsdp.linear %[[X16]], %[[W0]], %[[B0]] : (tensor<2x4xbf16>, tensor<8x4xbf16>, tensor<8xbf16>) -> tensor<2x8xbf16>
// CHECK:      fsdp.free %[[G0]] : tensor<40xbf16>
// CHECK-NEXT: fsdp.relu %{{.*}} : tensor<2x8xbf16>
// CHECK-NEXT: fsdp.all_gather @l1 : tensor<27xbf16>
// CHECK:      fsdp.cross_entropy %{{.*}}, %{{.*}} : (tensor<2x3xbf16>, tensor<2xi32>) -> tensor<f32>
// CHECK-NEXT: arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: fsdp.cross_entropy_backward %{{.*}} : (tensor<f32>, tensor<2x3xbf16>, tensor<2xi32>) -> tensor<2x3xbf16>
// CHECK:      %[[F1:.*]] = fsdp.pack %{{.*}}, %{{.*}} : (tensor<3x8xbf16>, tensor<3xbf16>) -> tensor<27xbf16>
// CHECK-NEXT: %[[C1:.*]] = fsdp.cast %[[F1]] : tensor<27xbf16> -> tensor<27xf32>
// CHECK-NEXT: fsdp.free %[[F1]] : tensor<27xbf16>
// CHECK-NEXT: %[[S1:.*]] = fsdp.reduce_scatter %[[C1]] @l1 : tensor<27xf32> -> tensor<14xf32>
// CHECK-NEXT: fsdp.free %[[C1]] : tensor<27xf32>
// The first layer's input gradient is never computed; its weight
// gradient reads the input, cast again inside the backward region.
// CHECK:      fsdp.compute @l0 backward
// CHECK:        fsdp.cast %{{.*}} : tensor<2x4xf32> -> tensor<2x4xbf16>
// CHECK:        fsdp.linear_grad_weight %{{.*}}, %{{.*}} : (tensor<2x8xbf16>, tensor<2x4xbf16>) -> tensor<8x4xbf16>
// CHECK:      %[[S0:.*]] = fsdp.reduce_scatter %{{.*}} @l0 : tensor<40xf32> -> tensor<20xf32>
// CHECK:      fsdp.adamw_shard @l0, %[[S0]], %{{.*}} : tensor<20xf32>
// CHECK-NEXT: fsdp.adamw_shard @l1, %[[S1]], %{{.*}} : tensor<14xf32>

// reduce-dtype=bf16: the bf16 gradient is reduced as it is, and AdamW
// reads the bf16 shard itself (it widens it exactly: no cast, no f32 copy).
// BF16RS:      %[[F1:.*]] = fsdp.pack %{{.*}} -> tensor<27xbf16>
// BF16RS-NEXT: %[[S1:.*]] = fsdp.reduce_scatter %[[F1]] @l1 : tensor<27xbf16> -> tensor<14xbf16>
// BF16RS-NEXT: fsdp.free %[[F1]] : tensor<27xbf16>
// BF16RS-NOT:  fsdp.cast %[[S1]]
// BF16RS:      fsdp.adamw_shard @l1, %[[S1]], %{{.*}} : tensor<14xbf16>

// A shard group of one reduces nothing: the bf16 gradient is not widened
// before its local copy (widening is exact before or after it), and AdamW
// reads it as it is.
// ONE:      %[[F1:.*]] = fsdp.pack %{{.*}} -> tensor<27xbf16>
// ONE-NOT:  fsdp.cast %[[F1]]
// ONE:      %[[S1:.*]] = fsdp.reduce_scatter %[[F1]] @l1 : tensor<27xbf16> -> tensor<27xbf16>
// ONE-NOT:  fsdp.cast %[[S1]]
// ONE:      fsdp.adamw_shard @l1, %[[S1]], %{{.*}} : tensor<27xbf16>

// Replicas of a shard group of one still reduce, over the replicate axis:
// in reduce-dtype (f32), the cast before the local copy.
// REPL:      %[[F1:.*]] = fsdp.pack %{{.*}} -> tensor<27xbf16>
// REPL-NEXT: %[[C1:.*]] = fsdp.cast %[[F1]] : tensor<27xbf16> -> tensor<27xf32>
// REPL:      %[[S1:.*]] = fsdp.reduce_scatter %[[C1]] @l1 over "shard" : tensor<27xf32> -> tensor<27xf32>
// REPL:      fsdp.all_reduce_mean %[[S1]] @l1 over "replicate" : tensor<27xf32>

// f32: nothing changes.
// NOOP-NOT: bf16
// NOOP-NOT: fsdp.cast

// Scheduled: the bf16 reduce-scatter overlaps the rest of the backward
// (its wait comes just before AdamW reads the shard).
// SCHED:      %[[T:.*]], %[[S:.*]] = fsdp.reduce_scatter_start %{{.*}} @l1 stream 2 : tensor<27xbf16> -> tensor<14xbf16>
// SCHED-NOT:  fsdp.wait %[[T]]
// SCHED:      fsdp.compute @l0 backward
// SCHED:      fsdp.wait %[[T]]
// SCHED:      fsdp.adamw_shard @l1, %[[S]]
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

// -----

// A parameter the loss ignores: its zero gradient is a bf16 constant.
fsdp.param @s : tensor<1xf32> init <ones> no_weight_decay
fsdp.param @w : tensor<2x2xf32> init <normal, std = 0.5>
fsdp.unit @tiny params [@s]
fsdp.unit @main params [@w]
// CHECK-LABEL: func.func @train_step(
// CHECK:      %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<1xf32>
// CHECK-NEXT: %[[Z16:.*]] = arith.constant dense<0.000000e+00> : tensor<1xbf16>
// CHECK-NEXT: %[[F:.*]] = fsdp.pack %[[Z16]] : (tensor<1xbf16>) -> tensor<1xbf16>
// CHECK-NEXT: %[[C:.*]] = fsdp.cast %[[F]] : tensor<1xbf16> -> tensor<1xf32>
// CHECK:      fsdp.reduce_scatter %[[C]] @tiny : tensor<1xf32> -> tensor<1xf32>
func.func @forward(%x: tensor<2x2xf32>, %t: tensor<2xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %0 = fsdp.compute @tiny forward ins(%x : tensor<2x2xf32>) -> tensor<2x2xf32> {
  ^bb0(%a: tensor<2x2xf32>):
    %s = fsdp.load @s : tensor<1xf32>
    fsdp.yield %a : tensor<2x2xf32>
  }
  %1 = fsdp.compute @main forward ins(%0 : tensor<2x2xf32>) -> tensor<2x2xf32> {
  ^bb0(%a: tensor<2x2xf32>):
    %w = fsdp.load @w : tensor<2x2xf32>
    %y = fsdp.linear %a, %w : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    fsdp.yield %y : tensor<2x2xf32>
  }
  %2 = fsdp.cross_entropy %1, %t : (tensor<2x2xf32>, tensor<2xi32>) -> tensor<f32>
  return %2 : tensor<f32>
}
