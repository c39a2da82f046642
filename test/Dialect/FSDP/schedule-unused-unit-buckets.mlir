// Buckets of reduce-scatters with units the loss ignores (@unused.*):
// their zero gradients are reduced where their AdamW is, after the
// optimizer steps of the units before them. A bucket closes before a
// reduce-scatter that starts after a shard of the bucket was read, so the
// two used layers share one bucket, and each unused unit is a bucket of
// its own (joining @unused.0 would move @layers.0's reduce-scatter after
// the AdamW that reads it: a use before its definition).
// RUN: fsdp-opt %s --fsdp-train-pipeline="world-size=2 bucket-bytes=100000" -o /dev/null
// RUN: fsdp-opt %s --fsdp-mesh=shard=2 --fsdp-autodiff --fsdp-shard --fsdp-schedule=bucket-bytes=100000 --fsdp-verify | sed -n '/train_step/,$p' \
// RUN:   | grep -o -E 'fsdp\.(reduce_scatter_start %[0-9]+ @[a-z_.0-9]+ stream [0-9]+( grouped)?|wait|adamw_shard @[a-z_.0-9]+)' \
// RUN:   | FileCheck %s

// CHECK:      fsdp.reduce_scatter_start {{%[0-9]+}} @layers.1 stream 2{{$}}
// CHECK-NEXT: fsdp.reduce_scatter_start {{%[0-9]+}} @layers.0 stream 2 grouped
// CHECK-NEXT: fsdp.wait
// CHECK-NEXT: fsdp.wait
// CHECK-NEXT: fsdp.adamw_shard @layers.0
// CHECK-NEXT: fsdp.adamw_shard @layers.1
// CHECK-NEXT: fsdp.reduce_scatter_start {{%[0-9]+}} @unused.0 stream 2{{$}}
// CHECK-NEXT: fsdp.wait
// CHECK-NEXT: fsdp.adamw_shard @unused.0
// CHECK-NEXT: fsdp.reduce_scatter_start {{%[0-9]+}} @unused.1 stream 2{{$}}
// CHECK-NEXT: fsdp.wait
// CHECK-NEXT: fsdp.adamw_shard @unused.1
// CHECK-NOT:  fsdp.

fsdp.param @layers.0.w : tensor<4x9xf32> init <normal, std = 0.5>
fsdp.param @layers.0.b : tensor<4xf32> init <zeros> no_weight_decay
fsdp.param @layers.1.w : tensor<4x4xf32> init <normal, std = 0.5>
fsdp.param @layers.1.b : tensor<4xf32> init <zeros> no_weight_decay
fsdp.param @unused.0.w : tensor<4xf32> init <zeros> no_weight_decay
fsdp.param @unused.1.w : tensor<4xf32> init <zeros> no_weight_decay
fsdp.unit @layers.0 params [@layers.0.w, @layers.0.b]
fsdp.unit @layers.1 params [@layers.1.w, @layers.1.b]
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
  %1 = fsdp.compute @layers.1 forward ins(%0 : tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%a: tensor<4x4xf32>):
    %w = fsdp.load @layers.1.w : tensor<4x4xf32>
    %b = fsdp.load @layers.1.b : tensor<4xf32>
    %y = fsdp.linear %a, %w, %b : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
    fsdp.yield %y : tensor<4x4xf32>
  }
  %loss = fsdp.cross_entropy %1, %t : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
