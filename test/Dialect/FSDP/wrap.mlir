// RUN: fsdp-opt %s -split-input-file --fsdp-wrap | FileCheck %s --check-prefix=BLOCK
// RUN: fsdp-opt %s -split-input-file --fsdp-wrap=policy=none | FileCheck %s --check-prefix=NONE
// RUN: fsdp-opt %s -split-input-file --fsdp-wrap="policy=size-threshold threshold-bytes=600" | FileCheck %s --check-prefix=SIZE
// Wrapping is idempotent: re-wrapping wrapped IR gives the same IR.
// RUN: fsdp-opt %s -split-input-file --fsdp-wrap | fsdp-opt -split-input-file --fsdp-wrap | FileCheck %s --check-prefix=BLOCK
// policy=given keeps the units an input has (here the size policy's) and
// wraps an input without units per block.
// RUN: fsdp-opt %s -split-input-file --fsdp-wrap="policy=size-threshold threshold-bytes=600" | fsdp-opt -split-input-file --fsdp-wrap=policy=given | FileCheck %s --check-prefix=SIZE
// RUN: fsdp-opt %s -split-input-file --fsdp-wrap=policy=given | FileCheck %s --check-prefix=BLOCK
// split-ends: the parameters outside blocks read only before the first
// block form @embed, only after the last @head.
// RUN: fsdp-opt %s -split-input-file --fsdp-wrap=split-ends=true | FileCheck %s --check-prefix=ENDS

// A three-layer MLP without units, loads hoisted to the top.
fsdp.param @layers.0.w : tensor<8x4xf32> init <normal, std = 0.5>
fsdp.param @layers.0.b : tensor<8xf32> init <zeros> no_weight_decay
fsdp.param @layers.1.w : tensor<8x8xf32> init <normal, std = 0.5>
fsdp.param @layers.2.w : tensor<3x8xf32> init <normal, std = 0.5>

// BLOCK: fsdp.unit @layers.0 params [@layers.0.w, @layers.0.b]
// BLOCK: fsdp.unit @layers.1 params [@layers.1.w]
// BLOCK: fsdp.unit @layers.2 params [@layers.2.w]
// BLOCK-LABEL: func.func @forward
// BLOCK: %[[L0:.*]] = fsdp.compute @layers.0 forward ins(%{{.*}} : tensor<2x4xf32>) -> tensor<2x8xf32> {
// BLOCK-NEXT: ^bb0(%[[X:.*]]: tensor<2x4xf32>):
// BLOCK-NEXT:   %[[W:.*]] = fsdp.load @layers.0.w
// BLOCK-NEXT:   %[[B:.*]] = fsdp.load @layers.0.b
// BLOCK-NEXT:   %[[Y:.*]] = fsdp.linear %[[X]], %[[W]], %[[B]]
// BLOCK-NEXT:   fsdp.yield %[[Y]] : tensor<2x8xf32>
// BLOCK-NEXT: }
// BLOCK-NEXT: %[[R0:.*]] = fsdp.relu %[[L0]]
// BLOCK-NEXT: %[[L1:.*]] = fsdp.compute @layers.1 forward ins(%[[R0]] : tensor<2x8xf32>)
// BLOCK:      fsdp.relu
// BLOCK-NEXT: %[[L2:.*]] = fsdp.compute @layers.2 forward
// BLOCK:      fsdp.cross_entropy %[[L2]]
// BLOCK-NOT:  fsdp.load

// NONE: fsdp.unit @root params [@layers.0.w, @layers.0.b, @layers.1.w, @layers.2.w]
// NONE-LABEL: func.func @forward
// NONE:      %[[R:.*]] = fsdp.compute @root forward ins(%{{.*}} : tensor<2x4xf32>) -> tensor<2x3xf32>
// NONE:        fsdp.linear
// NONE-NEXT:   fsdp.relu
// NONE-NEXT:   fsdp.linear
// NONE-NEXT:   fsdp.relu
// NONE-NEXT:   fsdp.linear
// NONE-NEXT:   fsdp.yield
// NONE:      fsdp.cross_entropy %[[R]]

// Layer 0 is 160 bytes, layer 1 256, layer 2 96: the first unit closes at
// 600 bytes only with all three. A weight and its bias are never split.
// SIZE: fsdp.unit @unit0 params [@layers.0.w, @layers.0.b, @layers.1.w, @layers.2.w]
// SIZE-NOT: fsdp.unit
func.func @forward(%x: tensor<2x4xf32>, %t: tensor<2xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %w0 = fsdp.load @layers.0.w : tensor<8x4xf32>
  %b0 = fsdp.load @layers.0.b : tensor<8xf32>
  %w1 = fsdp.load @layers.1.w : tensor<8x8xf32>
  %w2 = fsdp.load @layers.2.w : tensor<3x8xf32>
  %0 = fsdp.linear %x, %w0, %b0 : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %1 = fsdp.relu %0 : tensor<2x8xf32>
  %2 = fsdp.linear %1, %w1 : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %3 = fsdp.relu %2 : tensor<2x8xf32>
  %4 = fsdp.linear %3, %w2 : (tensor<2x8xf32>, tensor<3x8xf32>) -> tensor<2x3xf32>
  %5 = fsdp.cross_entropy %4, %t : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
  return %5 : tensor<f32>
}

// -----

// A GPT-like skeleton: the root unit (embedding table, tied head) computes at
// both ends, the block in between; a parameter-free op between two ops of
// the block (gelu) joins its region, the residual add after it does not.
fsdp.param @wte : tensor<16x8xf32> init <normal, std = 0.02>
fsdp.param @wpe : tensor<4x8xf32> init <normal, std = 0.02>
fsdp.param @h.0.fc.w : tensor<8x8xf32> init <normal, std = 0.02>
fsdp.param @h.0.proj.w : tensor<8x8xf32> init <normal, std = 0.02>

// BLOCK: fsdp.unit @root params [@wte, @wpe]
// BLOCK: fsdp.unit @h.0 params [@h.0.fc.w, @h.0.proj.w]
// BLOCK-LABEL: func.func @forward
// BLOCK:      %[[E:.*]] = fsdp.compute @root forward
// BLOCK:        fsdp.embedding
// BLOCK:      %[[H:.*]] = fsdp.compute @h.0 forward ins(%[[E]] : tensor<2x4x8xf32>)
// BLOCK:        fsdp.linear
// BLOCK-NEXT:   fsdp.gelu
// BLOCK-NEXT:   fsdp.linear
// BLOCK-NEXT:   fsdp.yield
// BLOCK:      %[[S:.*]] = fsdp.add %[[E]], %[[H]]
// BLOCK:      %[[HEAD:.*]] = fsdp.compute @root forward ins(%[[S]] : tensor<2x4x8xf32>)
// BLOCK:        fsdp.load @wte
// BLOCK:        fsdp.linear
// BLOCK:      fsdp.cross_entropy %[[HEAD]]

// The tied table is read at both ends: with split-ends it stays in @root
// (with @wpe, which the embedding reads with it).
// ENDS: fsdp.unit @root params [@wte, @wpe]
// ENDS-NEXT: fsdp.unit @h.0 params [@h.0.fc.w, @h.0.proj.w]
// ENDS-NOT: fsdp.unit

// @wte and @wpe (read by one op, 640 bytes) close the first unit.
// SIZE: fsdp.unit @unit0 params [@wte, @wpe]
// SIZE: fsdp.unit @unit1 params [@h.0.fc.w, @h.0.proj.w]
func.func @forward(%tok: tensor<2x4xi32>, %t: tensor<2x4xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %wte = fsdp.load @wte : tensor<16x8xf32>
  %wpe = fsdp.load @wpe : tensor<4x8xf32>
  %x = fsdp.embedding %tok, %wte, %wpe : (tensor<2x4xi32>, tensor<16x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  %fc = fsdp.load @h.0.fc.w : tensor<8x8xf32>
  %h = fsdp.linear %x, %fc : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %g = fsdp.gelu %h : tensor<2x4x8xf32>
  %pw = fsdp.load @h.0.proj.w : tensor<8x8xf32>
  %p = fsdp.linear %g, %pw : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %s = fsdp.add %x, %p : tensor<2x4x8xf32>
  %head = fsdp.load @wte : tensor<16x8xf32>
  %logits = fsdp.linear %s, %head : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = fsdp.cross_entropy %logits, %t : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Unit names never collide with other symbols: a parameter named "root".
// Without blocks, split-ends has no ends to split.
fsdp.param @root : tensor<4x4xf32> init <normal, std = 0.02>
// BLOCK: fsdp.unit @root_0 params [@root]
// NONE: fsdp.unit @root_0 params [@root]
// ENDS: fsdp.unit @root_0 params [@root]
func.func @forward(%x: tensor<2x4xf32>, %t: tensor<2xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %w = fsdp.load @root : tensor<4x4xf32>
  %y = fsdp.linear %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %l = fsdp.cross_entropy %y, %t : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A Llama-like skeleton, loads hoisted to the top: the token table is read
// before the blocks, the final norm and the untied head after them, a gain
// between the two blocks. With split-ends the ends get units of their own;
// what is read between blocks stays in @root.
fsdp.param @embed_tokens.w : tensor<16x8xf32> init <normal, std = 0.02>
fsdp.param @layers.0.w : tensor<8x8xf32> init <normal, std = 0.02>
fsdp.param @mid.w : tensor<8x8xf32> init <normal, std = 0.02>
fsdp.param @layers.1.w : tensor<8x8xf32> init <normal, std = 0.02>
fsdp.param @norm.w : tensor<8xf32> init <ones> no_weight_decay
fsdp.param @lm_head.w : tensor<16x8xf32> init <normal, std = 0.02>

// BLOCK: fsdp.unit @root params [@embed_tokens.w, @mid.w, @norm.w, @lm_head.w]
// BLOCK-NEXT: fsdp.unit @layers.0
// BLOCK-NEXT: fsdp.unit @layers.1

// ENDS: fsdp.unit @embed params [@embed_tokens.w]
// ENDS-NEXT: fsdp.unit @layers.0 params [@layers.0.w]
// ENDS-NEXT: fsdp.unit @root params [@mid.w]
// ENDS-NEXT: fsdp.unit @layers.1 params [@layers.1.w]
// ENDS-NEXT: fsdp.unit @head params [@norm.w, @lm_head.w]
// ENDS:      func.func @forward
// ENDS:      %[[E:.*]] = fsdp.compute @embed forward
// ENDS:        fsdp.embedding
// ENDS:      fsdp.compute @layers.0 forward ins(%[[E]] : tensor<2x4x8xf32>)
// ENDS:      fsdp.compute @root forward
// ENDS:      fsdp.compute @layers.1 forward
// ENDS:      %[[H:.*]] = fsdp.compute @head forward
// ENDS:        fsdp.rms_norm
// ENDS-NEXT:   fsdp.linear
// ENDS-NEXT:   fsdp.yield
// ENDS:      fsdp.cross_entropy %[[H]]
func.func @forward(%tok: tensor<2x4xi32>, %t: tensor<2x4xi32>) -> tensor<f32> attributes {fsdp.forward} {
  %wte = fsdp.load @embed_tokens.w : tensor<16x8xf32>
  %w0 = fsdp.load @layers.0.w : tensor<8x8xf32>
  %wm = fsdp.load @mid.w : tensor<8x8xf32>
  %w1 = fsdp.load @layers.1.w : tensor<8x8xf32>
  %g = fsdp.load @norm.w : tensor<8xf32>
  %head = fsdp.load @lm_head.w : tensor<16x8xf32>
  %x = fsdp.embedding %tok, %wte : (tensor<2x4xi32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %h0 = fsdp.linear %x, %w0 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %hm = fsdp.linear %h0, %wm : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %h1 = fsdp.linear %hm, %w1 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %n, %rstd = fsdp.rms_norm %h1, %g : (tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
  %logits = fsdp.linear %n, %head : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = fsdp.cross_entropy %logits, %t : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
