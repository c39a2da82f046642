// RUN: fsdp-opt %s --split-input-file --fsdp-attention | FileCheck %s --check-prefix=AUTO
// RUN: fsdp-opt %s --split-input-file --fsdp-attention=impl=materialized | FileCheck %s --check-prefix=MAT
// RUN: fsdp-opt %s --split-input-file --fsdp-attention=impl=blocked | FileCheck %s --check-prefix=BLK
// RUN: not fsdp-opt %s --split-input-file --fsdp-attention=impl=flash 2>&1 | FileCheck %s --check-prefix=BAD

// auto: blocked wherever T > 1; the saved result becomes one log-sum-exp
// per row, its uses follow the new op.
// AUTO-LABEL: func.func @seq4
// AUTO: %[[O:.*]], %{{.*}} = fsdp.attention %{{.*}} {heads = 2 : i64, impl = #fsdp.attention_impl<blocked>} : (tensor<1x4x24xf32>) -> (tensor<1x4x8xf32>, tensor<1x2x4xf32>)
// AUTO: return %[[O]]
// MAT-LABEL: func.func @seq4
// MAT: fsdp.attention %{{.*}} {heads = 2 : i64} : (tensor<1x4x24xf32>) -> (tensor<1x4x8xf32>, tensor<1x2x4x4xf32>)
// BLK-LABEL: func.func @seq4
// BLK: impl = #fsdp.attention_impl<blocked>
func.func @seq4(%qkv: tensor<1x4x24xf32>) -> tensor<1x4x8xf32> {
  %o, %p = fsdp.attention %qkv {heads = 2 : i64} : (tensor<1x4x24xf32>) -> (tensor<1x4x8xf32>, tensor<1x2x4x4xf32>)
  return %o : tensor<1x4x8xf32>
}

// -----

// T = 1: the probabilities are one number per row, as small as the
// log-sum-exp; auto keeps them.
// AUTO-LABEL: func.func @seq1
// AUTO: fsdp.attention %{{.*}} {heads = 1 : i64} : (tensor<2x1x6xf32>) -> (tensor<2x1x2xf32>, tensor<2x1x1x1xf32>)
// BLK-LABEL: func.func @seq1
// BLK: fsdp.attention %{{.*}} {heads = 1 : i64, impl = #fsdp.attention_impl<blocked>} : (tensor<2x1x6xf32>) -> (tensor<2x1x2xf32>, tensor<2x1x1xf32>)
func.func @seq1(%qkv: tensor<2x1x6xf32>) -> tensor<2x1x2xf32> {
  %o, %p = fsdp.attention %qkv {heads = 1 : i64} : (tensor<2x1x6xf32>) -> (tensor<2x1x2xf32>, tensor<2x1x1x1xf32>)
  return %o : tensor<2x1x2xf32>
}

// -----

// A forward that reads the probabilities keeps them, whatever impl says.
// BLK-LABEL: func.func @reads_probs
// BLK: fsdp.attention %{{.*}} {heads = 2 : i64} : (tensor<1x4x24xf32>) -> (tensor<1x4x8xf32>, tensor<1x2x4x4xf32>)
func.func @reads_probs(%qkv: tensor<1x4x24xf32>) -> tensor<1x2x4x4xf32> {
  %o, %p = fsdp.attention %qkv {heads = 2 : i64} : (tensor<1x4x24xf32>) -> (tensor<1x4x8xf32>, tensor<1x2x4x4xf32>)
  return %p : tensor<1x2x4x4xf32>
}

// -----

// Back to materialized from blocked.
// MAT-LABEL: func.func @from_blocked
// MAT: fsdp.attention %{{.*}} {heads = 2 : i64} : (tensor<1x4x24xf32>) -> (tensor<1x4x8xf32>, tensor<1x2x4x4xf32>)
func.func @from_blocked(%qkv: tensor<1x4x24xf32>) -> tensor<1x4x8xf32> {
  %o, %l = fsdp.attention %qkv {heads = 2 : i64, impl = #fsdp.attention_impl<blocked>} : (tensor<1x4x24xf32>) -> (tensor<1x4x8xf32>, tensor<1x2x4xf32>)
  return %o : tensor<1x4x8xf32>
}

// -----

// A head of 256 is wider than the CUDA blocked kernels' widest tile (128):
// auto keeps the probabilities; blocked asks for it anyway.
// AUTO-LABEL: func.func @wide_head
// AUTO: fsdp.attention %{{.*}} {heads = 1 : i64} : (tensor<1x4x768xf32>) -> (tensor<1x4x256xf32>, tensor<1x1x4x4xf32>)
// BLK-LABEL: func.func @wide_head
// BLK: impl = #fsdp.attention_impl<blocked>
func.func @wide_head(%qkv: tensor<1x4x768xf32>) -> tensor<1x4x256xf32> {
  %o, %p = fsdp.attention %qkv {heads = 1 : i64} : (tensor<1x4x768xf32>) -> (tensor<1x4x256xf32>, tensor<1x1x4x4xf32>)
  return %o : tensor<1x4x256xf32>
}

// BAD: fsdp-attention: impl must be auto, materialized or blocked, got 'flash'

// -----

// Grouped-query attention keeps kv_heads in both forms; its head size
// (hs = 2) comes from heads + 2 kv_heads = 8 slots of qkv, not 3C.
// AUTO-LABEL: func.func @grouped_query
// AUTO: fsdp.attention %{{.*}} {heads = 4 : i64, impl = #fsdp.attention_impl<blocked>, kv_heads = 2 : i64} : (tensor<1x4x16xf32>) -> (tensor<1x4x8xf32>, tensor<1x4x4xf32>)
// MAT-LABEL: func.func @grouped_query
// MAT: fsdp.attention %{{.*}} {heads = 4 : i64, kv_heads = 2 : i64} : (tensor<1x4x16xf32>) -> (tensor<1x4x8xf32>, tensor<1x4x4x4xf32>)
func.func @grouped_query(%qkv: tensor<1x4x16xf32>) -> tensor<1x4x8xf32> {
  %o, %p = fsdp.attention %qkv {heads = 4 : i64, kv_heads = 2 : i64} : (tensor<1x4x16xf32>) -> (tensor<1x4x8xf32>, tensor<1x4x4x4xf32>)
  return %o : tensor<1x4x8xf32>
}

// -----

// One kv head of 256 (4 query heads of 256: qkv 6 x 256 wide) is past the
// blocked kernels' widest tile: auto keeps the probabilities.
// AUTO-LABEL: func.func @grouped_wide_head
// AUTO: fsdp.attention %{{.*}} {heads = 4 : i64, kv_heads = 1 : i64} : (tensor<1x4x1536xf32>) -> (tensor<1x4x1024xf32>, tensor<1x4x4x4xf32>)
func.func @grouped_wide_head(%qkv: tensor<1x4x1536xf32>) -> tensor<1x4x1024xf32> {
  %o, %p = fsdp.attention %qkv {heads = 4 : i64, kv_heads = 1 : i64} : (tensor<1x4x1536xf32>) -> (tensor<1x4x1024xf32>, tensor<1x4x4x4xf32>)
  return %o : tensor<1x4x1024xf32>
}
