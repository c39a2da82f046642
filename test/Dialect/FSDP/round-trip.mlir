// Every op, attribute and type of the dialect prints and parses back, in the
// custom and in the generic form.
// RUN: fsdp-opt %s | fsdp-opt | FileCheck %s
// RUN: fsdp-opt %s --mlir-print-op-generic | fsdp-opt | FileCheck %s

// CHECK: fsdp.param @wte : tensor<16x8xf32> init <normal, std = 2.000000e-02>
fsdp.param @wte : tensor<16x8xf32> init <normal, std = 0.02>
// CHECK: fsdp.param @wpe : tensor<4x8xf32> init <normal, std = 0.0040824829046386306>
fsdp.param @wpe : tensor<4x8xf32> init <normal, std = 0.0040824829046386306>
// CHECK: fsdp.param @h.0.ln.w : tensor<8xf32> init <ones> no_weight_decay
fsdp.param @h.0.ln.w : tensor<8xf32> init <ones> no_weight_decay
// CHECK: fsdp.param @h.0.ln.b : tensor<8xf32> init <zeros> no_weight_decay
fsdp.param @h.0.ln.b : tensor<8xf32> init <zeros> no_weight_decay
// CHECK: fsdp.param @h.0.qkv.w : tensor<24x8xf32> init <normal, std = 2.000000e-02>
fsdp.param @h.0.qkv.w : tensor<24x8xf32> init <normal, std = 0.02>
// CHECK: fsdp.param @h.0.fc.w : tensor<8x8xbf16> init <normal, std = 1.000000e+00>
fsdp.param @h.0.fc.w : tensor<8x8xbf16> init <normal, std = 1.0>
// CHECK: fsdp.unit @root params [@wte, @wpe]
fsdp.unit @root params [@wte, @wpe]
// CHECK: fsdp.unit @h.0 params [@h.0.ln.w, @h.0.ln.b, @h.0.qkv.w, @h.0.fc.w]
fsdp.unit @h.0 params [@h.0.ln.w, @h.0.ln.b, @h.0.qkv.w, @h.0.fc.w]

// CHECK-LABEL: func.func @forward
// CHECK-SAME: attributes {fsdp.forward}
func.func @forward(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> attributes {fsdp.forward} {
  // CHECK: fsdp.compute @root forward ins(%{{.*}} : tensor<2x4xi32>) -> tensor<2x4x8xf32> {
  %x = fsdp.compute @root forward ins(%tokens : tensor<2x4xi32>) -> tensor<2x4x8xf32> {
  ^bb0(%t: tensor<2x4xi32>):
    // CHECK: fsdp.load @wte : tensor<16x8xf32>
    %wte = fsdp.load @wte : tensor<16x8xf32>
    %wpe = fsdp.load @wpe : tensor<4x8xf32>
    // CHECK: fsdp.embedding %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x4xi32>, tensor<16x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
    %e = fsdp.embedding %t, %wte, %wpe : (tensor<2x4xi32>, tensor<16x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
    // CHECK: fsdp.yield %{{.*}} : tensor<2x4x8xf32>
    fsdp.yield %e : tensor<2x4x8xf32>
  }
  // CHECK: fsdp.compute @h.0 forward ins(
  %y = fsdp.compute @h.0 forward ins(%x : tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  ^bb0(%in: tensor<2x4x8xf32>):
    %w = fsdp.load @h.0.ln.w : tensor<8xf32>
    %b = fsdp.load @h.0.ln.b : tensor<8xf32>
    %q = fsdp.load @h.0.qkv.w : tensor<24x8xf32>
    // The default epsilon (1e-5) is elided; another one is printed.
    // CHECK: fsdp.layer_norm %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
    %n0, %mean0, %rstd0 = fsdp.layer_norm %in, %w, %b {epsilon = 1.0e-5 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
    // CHECK: fsdp.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 9.99999997E-7 : f32}
    %n, %mean, %rstd = fsdp.layer_norm %n0, %w, %b {epsilon = 1.0e-6 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
    // CHECK: fsdp.linear %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<24x8xf32>) -> tensor<2x4x24xf32>
    %qkv = fsdp.linear %n, %q : (tensor<2x4x8xf32>, tensor<24x8xf32>) -> tensor<2x4x24xf32>
    // CHECK: fsdp.attention %{{.*}} {heads = 2 : i64} : (tensor<2x4x24xf32>) -> (tensor<2x4x8xf32>, tensor<2x2x4x4xf32>)
    %a, %p = fsdp.attention %qkv {heads = 2 : i64} : (tensor<2x4x24xf32>) -> (tensor<2x4x8xf32>, tensor<2x2x4x4xf32>)
    %g = fsdp.gelu %a : tensor<2x4x8xf32>
    // CHECK: fsdp.gelu %{{.*}} : tensor<2x4x8xf32>
    %r = fsdp.relu %g : tensor<2x4x8xf32>
    // CHECK: fsdp.relu %{{.*}} : tensor<2x4x8xf32>
    %h = fsdp.cast %r : tensor<2x4x8xf32> -> tensor<2x4x8xbf16>
    // CHECK: fsdp.cast %{{.*}} : tensor<2x4x8xf32> -> tensor<2x4x8xbf16>
    %s = fsdp.add %r, %in : tensor<2x4x8xf32>
    // CHECK: fsdp.add %{{.*}}, %{{.*}} : tensor<2x4x8xf32>
    fsdp.yield %s : tensor<2x4x8xf32>
  }
  // CHECK: fsdp.cross_entropy %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  %loss = fsdp.cross_entropy %y, %targets : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @linear_with_bias
func.func @linear_with_bias(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  // CHECK: fsdp.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %y = fsdp.linear %x, %w, %b : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @backward_ops
func.func @backward_ops(%dy: tensor<2x4x8xf32>, %x: tensor<2x4x8xf32>, %w: tensor<8xf32>,
                        %stat: tensor<2x4xf32>, %tokens: tensor<2x4xi32>,
                        %qkv: tensor<2x4x24xf32>, %probs: tensor<2x2x4x4xf32>,
                        %wq: tensor<24x8xf32>, %dq: tensor<2x4x24xf32>,
                        %dloss: tensor<f32>, %step: i64) {
  // CHECK: fsdp.embedding_backward %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> (tensor<16x8xf32>, tensor<4x8xf32>)
  %gwte, %gwpe = fsdp.embedding_backward %dy, %tokens : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> (tensor<16x8xf32>, tensor<4x8xf32>)
  // CHECK: fsdp.layer_norm_backward
  %dx, %dw, %db = fsdp.layer_norm_backward %dy, %x, %w, %stat, %stat : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  // CHECK: fsdp.linear_grad_input %{{.*}}, %{{.*}} : (tensor<2x4x24xf32>, tensor<24x8xf32>) -> tensor<2x4x8xf32>
  %gi = fsdp.linear_grad_input %dq, %wq : (tensor<2x4x24xf32>, tensor<24x8xf32>) -> tensor<2x4x8xf32>
  // CHECK: fsdp.linear_grad_weight %{{.*}}, %{{.*}} : (tensor<2x4x24xf32>, tensor<2x4x8xf32>) -> tensor<24x8xf32>
  %gw = fsdp.linear_grad_weight %dq, %x : (tensor<2x4x24xf32>, tensor<2x4x8xf32>) -> tensor<24x8xf32>
  // CHECK: fsdp.bias_grad %{{.*}} : (tensor<2x4x24xf32>) -> tensor<24xf32>
  %gb = fsdp.bias_grad %dq : (tensor<2x4x24xf32>) -> tensor<24xf32>
  // CHECK: fsdp.gelu_backward %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %gg = fsdp.gelu_backward %dy, %x : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  // CHECK: fsdp.relu_backward %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %gr = fsdp.relu_backward %dy, %x : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  // CHECK: fsdp.attention_backward %{{.*}}, %{{.*}}, %{{.*}} {heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x24xf32>, tensor<2x2x4x4xf32>) -> tensor<2x4x24xf32>
  %ga = fsdp.attention_backward %dy, %qkv, %probs {heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x24xf32>, tensor<2x2x4x4xf32>) -> tensor<2x4x24xf32>
  // The blocked form: a log-sum-exp per row, and the forward's output.
  // CHECK: %{{.*}}, %[[LSE:.*]] = fsdp.attention %{{.*}} {heads = 2 : i64, impl = #fsdp.attention_impl<blocked>} : (tensor<2x4x24xf32>) -> (tensor<2x4x8xf32>, tensor<2x2x4xf32>)
  %bo, %lse = fsdp.attention %qkv {heads = 2 : i64, impl = #fsdp.attention_impl<blocked>} : (tensor<2x4x24xf32>) -> (tensor<2x4x8xf32>, tensor<2x2x4xf32>)
  // CHECK: fsdp.attention_backward %{{.*}}, %{{.*}}, %[[LSE]], %{{.*}} {heads = 2 : i64, impl = #fsdp.attention_impl<blocked>} : (tensor<2x4x8xf32>, tensor<2x4x24xf32>, tensor<2x2x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x24xf32>
  %gb2 = fsdp.attention_backward %dy, %qkv, %lse, %bo {heads = 2 : i64, impl = #fsdp.attention_impl<blocked>} : (tensor<2x4x8xf32>, tensor<2x4x24xf32>, tensor<2x2x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x24xf32>
  // CHECK: fsdp.cross_entropy_backward %{{.*}}, %{{.*}}, %{{.*}} : (tensor<f32>, tensor<2x4x24xf32>, tensor<2x4xi32>) -> tensor<2x4x24xf32>
  %gc = fsdp.cross_entropy_backward %dloss, %qkv, %tokens : (tensor<f32>, tensor<2x4x24xf32>, tensor<2x4xi32>) -> tensor<2x4x24xf32>
  // CHECK: fsdp.adamw @h.0.qkv.w, %{{.*}}, %{{.*}} {beta1 = 0.899999976 : f32, beta2 = 0.949999988 : f32, eps = 9.99999993E-9 : f32, lr = 3.000000e-04 : f32, weight_decay = 1.000000e-01 : f32} : tensor<24x8xf32>
  fsdp.adamw @h.0.qkv.w, %gw, %step {lr = 3.0e-4 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.1 : f32} : tensor<24x8xf32>
  // CHECK: fsdp.adamw @h.0.ln.w, {{.*}} weight_decay = 0.000000e+00 : f32} : tensor<8xf32>
  fsdp.adamw @h.0.ln.w, %dw, %step {lr = 3.0e-4 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.0 : f32} : tensor<8xf32>
  return
}

// CHECK-LABEL: func.func @sharding_ops
func.func @sharding_ops(%step: i64) {
  // CHECK: %[[G:.*]] = fsdp.all_gather @root : tensor<160xf32>
  %g = fsdp.all_gather @root : tensor<160xf32>
  // CHECK: fsdp.view %[[G]][128] : tensor<160xf32> -> tensor<4x8xf32>
  %v = fsdp.view %g[128] : tensor<160xf32> -> tensor<4x8xf32>
  %w = fsdp.view %g[0] : tensor<160xf32> -> tensor<16x8xf32>
  // CHECK: %[[P:.*]] = fsdp.pack %{{.*}}, %{{.*}} : (tensor<16x8xf32>, tensor<4x8xf32>) -> tensor<160xf32>
  %p = fsdp.pack %w, %v : (tensor<16x8xf32>, tensor<4x8xf32>) -> tensor<160xf32>
  // CHECK: %[[S:.*]] = fsdp.reduce_scatter %[[P]] @root : tensor<160xf32> -> tensor<160xf32>
  %s = fsdp.reduce_scatter %p @root : tensor<160xf32> -> tensor<160xf32>
  // CHECK: fsdp.free %[[P]] : tensor<160xf32>
  fsdp.free %p : tensor<160xf32>
  fsdp.free %g : tensor<160xf32>
  // CHECK: fsdp.adamw_shard @root, %[[S]], %{{.*}} {beta1
  fsdp.adamw_shard @root, %s, %step {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.1 : f32} : tensor<160xf32>
  // Gradient clipping: sums of squares chained, all-reduced, the
  // coefficient, AdamW scaled by it.
  // CHECK: %[[Q0:.*]] = fsdp.grad_sq_sum @root, %[[S]] : tensor<160xf32>
  %q0 = fsdp.grad_sq_sum @root, %s : tensor<160xf32>
  // CHECK: %[[Q1:.*]] = fsdp.grad_sq_sum @root, %[[S]], %[[Q0]] : tensor<160xf32>
  %q1 = fsdp.grad_sq_sum @root, %s, %q0 : tensor<160xf32>
  // CHECK: %[[R:.*]] = fsdp.all_reduce_sum %[[Q1]] : tensor<f32>
  %r = fsdp.all_reduce_sum %q1 : tensor<f32>
  // CHECK: %[[C:.*]] = fsdp.clip_coefficient %[[R]] {max_norm = 1.000000e+00 : f32}
  %c = fsdp.clip_coefficient %r {max_norm = 1.0 : f32}
  // CHECK: fsdp.adamw_shard @root, %[[S]], %{{.*}} scale %[[C]] {beta1
  fsdp.adamw_shard @root, %s, %step scale %c {lr = 1.0e-3 : f32, beta1 = 0.9 : f32, beta2 = 0.95 : f32, eps = 1.0e-8 : f32, weight_decay = 0.1 : f32} : tensor<160xf32>
  return
}

// CHECK-LABEL: func.func @async_ops
func.func @async_ops(%full: tensor<160xf32>) {
  // CHECK: %{{.*}}, %{{.*}} = fsdp.all_gather_start @root stream 1 : tensor<160xf32>
  %t1, %g1 = fsdp.all_gather_start @root stream 1 : tensor<160xf32>
  // CHECK-NEXT: fsdp.all_gather_start @root stream 1 grouped : tensor<160xf32>
  %t2, %g2 = fsdp.all_gather_start @root stream 1 grouped : tensor<160xf32>
  // CHECK-NEXT: fsdp.reduce_scatter_start %{{.*}} @root stream 2 : tensor<160xf32> -> tensor<160xf32>
  %t3, %s1 = fsdp.reduce_scatter_start %full @root stream 2 : tensor<160xf32> -> tensor<160xf32>
  // CHECK-NEXT: fsdp.reduce_scatter_start %{{.*}} @root stream 2 grouped : tensor<160xf32> -> tensor<160xf32>
  %t4, %s2 = fsdp.reduce_scatter_start %full @root stream 2 grouped : tensor<160xf32> -> tensor<160xf32>
  // CHECK-NEXT: fsdp.wait
  fsdp.wait %t1
  fsdp.wait %t2
  fsdp.wait %t3
  fsdp.wait %t4
  return
}

// CHECK-LABEL: func.func @async_all_to_all
func.func @async_all_to_all(%x: tensor<6x8xf32>, %s: tensor<2x2xi32>, %r: tensor<2x2xi32>) -> tensor<12x8xf32> {
  // CHECK: %[[T:.*]], %[[Y:.*]] = fsdp.all_to_all_start %{{.*}}, %{{.*}}, %{{.*}} stream 4 over "expert" : (tensor<6x8xf32>, tensor<2x2xi32>, tensor<2x2xi32>) -> tensor<12x8xf32>
  %t, %y = fsdp.all_to_all_start %x, %s, %r stream 4 over "expert" : (tensor<6x8xf32>, tensor<2x2xi32>, tensor<2x2xi32>) -> tensor<12x8xf32>
  // CHECK-NEXT: fsdp.wait %[[T]]
  fsdp.wait %t
  return %y : tensor<12x8xf32>
}

// CHECK-LABEL: func.func private @token_type
// CHECK-SAME: !fsdp.token
func.func private @token_type(!fsdp.token) -> !fsdp.token

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: attributes {fsdp.train_step}
func.func @train_step(%x: tensor<2x4x8xf32>) -> tensor<f32> attributes {fsdp.train_step} {
  %t = arith.constant dense<0> : tensor<2x4xi32>
  %loss = fsdp.cross_entropy %x, %t : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// Llama's ops: rms_norm, swiglu, rope (kv_heads and theta optional) and
// their backward.
// CHECK-LABEL: func.func @llama_ops
func.func @llama_ops(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>,
                     %g: tensor<2x4x16xf32>, %u: tensor<2x4x16xf32>,
                     %qkv: tensor<2x4x32xf32>, %mha: tensor<2x4x24xf32>) {
  // CHECK: %{{.*}}, %[[RSTD:.*]] = fsdp.rms_norm %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
  %n, %rstd = fsdp.rms_norm %x, %w : (tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
  // CHECK: fsdp.rms_norm %{{.*}}, %{{.*}} {epsilon = 9.99999974E-6 : f32}
  %n2, %rstd2 = fsdp.rms_norm %x, %w {epsilon = 1.0e-5 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
  // CHECK: fsdp.rms_norm_backward %{{.*}}, %{{.*}}, %{{.*}}, %[[RSTD]] : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  %dx, %dw = fsdp.rms_norm_backward %x, %x, %w, %rstd : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  // CHECK: fsdp.swiglu %{{.*}}, %{{.*}} : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %h = fsdp.swiglu %g, %u : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  // CHECK: fsdp.swiglu_backward %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>)
  %dg, %du = fsdp.swiglu_backward %h, %g, %u : (tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>)
  // Grouped: 2 query heads and 1 kv head of 8 (2 + 2 * 1 = 4 heads of qkv).
  // CHECK: fsdp.rope %{{.*}} {heads = 2 : i64, kv_heads = 1 : i64, theta = 5.000000e+05 : f32} : (tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
  %r = fsdp.rope %qkv {heads = 2 : i64, kv_heads = 1 : i64, theta = 5.0e5 : f32} : (tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
  // CHECK: fsdp.rope_backward %{{.*}} {heads = 2 : i64, kv_heads = 1 : i64, theta = 5.000000e+05 : f32} : (tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
  %dr = fsdp.rope_backward %r {heads = 2 : i64, kv_heads = 1 : i64, theta = 5.0e5 : f32} : (tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
  // Multi-head (kv_heads = heads) with the default theta: 2 heads of 4.
  // CHECK: fsdp.rope %{{.*}} {heads = 2 : i64} : (tensor<2x4x24xf32>) -> tensor<2x4x24xf32>
  %r1 = fsdp.rope %mha {heads = 2 : i64} : (tensor<2x4x24xf32>) -> tensor<2x4x24xf32>
  // Rope scaling (Hugging Face's rope_type): attributes at their defaults
  // are not printed.
  // CHECK: fsdp.rope %{{.*}} {factor = 8.000000e+00 : f64, heads = 2 : i64, kv_heads = 1 : i64, original_max_positions = 8192 : i64, scaling = #fsdp.rope_scaling<llama3>, theta = 5.000000e+05 : f32}
  %r2 = fsdp.rope %qkv {heads = 2 : i64, kv_heads = 1 : i64, theta = 5.0e5 : f32, scaling = #fsdp.rope_scaling<llama3>, factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_positions = 8192} : (tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
  // CHECK: fsdp.rope_backward %{{.*}} {factor = 2.500000e+00 : f64, heads = 2 : i64, scaling = #fsdp.rope_scaling<linear>}
  %r3 = fsdp.rope_backward %mha {heads = 2 : i64, scaling = #fsdp.rope_scaling<linear>, factor = 2.5} : (tensor<2x4x24xf32>) -> tensor<2x4x24xf32>
  // CHECK: fsdp.rope %{{.*}} {attention_factor = 1.138600e+00 : f64, correction_high = 3.000000e+00 : f64, correction_low = 1.000000e+00 : f64, factor = 4.000000e+00 : f64, heads = 2 : i64, scaling = #fsdp.rope_scaling<yarn>}
  %r4 = fsdp.rope %mha {heads = 2 : i64, scaling = #fsdp.rope_scaling<yarn>, factor = 4.0, attention_factor = 1.1386, correction_low = 1.0, correction_high = 3.0} : (tensor<2x4x24xf32>) -> tensor<2x4x24xf32>
  // CHECK: fsdp.rope %{{.*}} {heads = 2 : i64} :
  %r5 = fsdp.rope %mha {heads = 2 : i64, scaling = #fsdp.rope_scaling<default>} : (tensor<2x4x24xf32>) -> tensor<2x4x24xf32>
  return
}

// Qwen3's qk_norm and its backward: 2 query heads and 1 kv head of 8
// (qkv 32 wide), one rstd per q and k head of each row (2 + 1).
// CHECK-LABEL: func.func @qwen3_ops
func.func @qwen3_ops(%qkv: tensor<2x4x32xf32>, %qw: tensor<8xf32>,
                     %kw: tensor<8xf32>, %mha: tensor<2x4x24xf32>,
                     %w4: tensor<4xf32>) {
  // CHECK: %{{.*}}, %[[QRSTD:.*]] = fsdp.qk_norm %{{.*}}, %{{.*}}, %{{.*}} {heads = 2 : i64, kv_heads = 1 : i64} : (tensor<2x4x32xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x4x32xf32>, tensor<2x4x3xf32>)
  %n, %rstd = fsdp.qk_norm %qkv, %qw, %kw {heads = 2 : i64, kv_heads = 1 : i64} : (tensor<2x4x32xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x4x32xf32>, tensor<2x4x3xf32>)
  // CHECK: fsdp.qk_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 9.99999974E-6 : f32, heads = 2 : i64, kv_heads = 1 : i64}
  %n2, %rstd2 = fsdp.qk_norm %qkv, %qw, %kw {heads = 2 : i64, kv_heads = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x4x32xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x4x32xf32>, tensor<2x4x3xf32>)
  // CHECK: fsdp.qk_norm_backward %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[QRSTD]] {heads = 2 : i64, kv_heads = 1 : i64} : (tensor<2x4x32xf32>, tensor<2x4x32xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x4x3xf32>) -> (tensor<2x4x32xf32>, tensor<8xf32>, tensor<8xf32>)
  %d:3 = fsdp.qk_norm_backward %n, %qkv, %qw, %kw, %rstd {heads = 2 : i64, kv_heads = 1 : i64} : (tensor<2x4x32xf32>, tensor<2x4x32xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x4x3xf32>) -> (tensor<2x4x32xf32>, tensor<8xf32>, tensor<8xf32>)
  // Multi-head (kv_heads = heads): 2 heads of 4 in 24, 4 rstd per row.
  // CHECK: fsdp.qk_norm %{{.*}}, %{{.*}}, %{{.*}} {heads = 2 : i64} : (tensor<2x4x24xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x24xf32>, tensor<2x4x4xf32>)
  %m, %mrstd = fsdp.qk_norm %mha, %w4, %w4 {heads = 2 : i64} : (tensor<2x4x24xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x24xf32>, tensor<2x4x4xf32>)
  return
}

// Grouped-query attention: 4 query heads of 2 channels, 2 kv heads (qkv
// 8 + 2 * 2 * 2 = 16 wide), in both forms.
// CHECK-LABEL: func.func @grouped_query
func.func @grouped_query(%qkv: tensor<2x4x16xf32>, %dy: tensor<2x4x8xf32>) {
  // CHECK: %{{.*}}, %[[P:.*]] = fsdp.attention %{{.*}} {heads = 4 : i64, kv_heads = 2 : i64} : (tensor<2x4x16xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4x4xf32>)
  %a, %p = fsdp.attention %qkv {heads = 4 : i64, kv_heads = 2 : i64} : (tensor<2x4x16xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4x4xf32>)
  // CHECK: fsdp.attention_backward %{{.*}}, %{{.*}}, %[[P]] {heads = 4 : i64, kv_heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x16xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x16xf32>
  %g = fsdp.attention_backward %dy, %qkv, %p {heads = 4 : i64, kv_heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x16xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x16xf32>
  // CHECK: %[[O:.*]], %[[L:.*]] = fsdp.attention %{{.*}} {heads = 4 : i64, impl = #fsdp.attention_impl<blocked>, kv_heads = 2 : i64} : (tensor<2x4x16xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>)
  %o, %l = fsdp.attention %qkv {heads = 4 : i64, kv_heads = 2 : i64, impl = #fsdp.attention_impl<blocked>} : (tensor<2x4x16xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>)
  // CHECK: fsdp.attention_backward %{{.*}}, %{{.*}}, %[[L]], %[[O]] {heads = 4 : i64, impl = #fsdp.attention_impl<blocked>, kv_heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x16xf32>, tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x16xf32>
  %gb = fsdp.attention_backward %dy, %qkv, %l, %o {heads = 4 : i64, kv_heads = 2 : i64, impl = #fsdp.attention_impl<blocked>} : (tensor<2x4x8xf32>, tensor<2x4x16xf32>, tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x16xf32>
  return
}

// A sliding window (Mistral's): query i sees keys i - 3 < j <= i; window 0
// (the default, no window) is left out when printed.
// CHECK-LABEL: func.func @sliding_window
func.func @sliding_window(%qkv: tensor<2x4x16xf32>, %dy: tensor<2x4x8xf32>) {
  // CHECK: %{{.*}}, %[[P:.*]] = fsdp.attention %{{.*}} {heads = 4 : i64, kv_heads = 2 : i64, window = 3 : i64} : (tensor<2x4x16xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4x4xf32>)
  %a, %p = fsdp.attention %qkv {heads = 4 : i64, kv_heads = 2 : i64, window = 3 : i64} : (tensor<2x4x16xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4x4xf32>)
  // CHECK: fsdp.attention_backward %{{.*}}, %{{.*}}, %[[P]] {heads = 4 : i64, kv_heads = 2 : i64, window = 3 : i64}
  %g = fsdp.attention_backward %dy, %qkv, %p {heads = 4 : i64, kv_heads = 2 : i64, window = 3 : i64} : (tensor<2x4x8xf32>, tensor<2x4x16xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x16xf32>
  // CHECK: %[[O:.*]], %[[L:.*]] = fsdp.attention %{{.*}} {heads = 4 : i64, impl = #fsdp.attention_impl<blocked>, kv_heads = 2 : i64, window = 3 : i64}
  %o, %l = fsdp.attention %qkv {heads = 4 : i64, kv_heads = 2 : i64, impl = #fsdp.attention_impl<blocked>, window = 3 : i64} : (tensor<2x4x16xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>)
  // CHECK: fsdp.attention_backward %{{.*}}, %{{.*}}, %[[L]], %[[O]] {heads = 4 : i64, impl = #fsdp.attention_impl<blocked>, kv_heads = 2 : i64, window = 3 : i64}
  %gb = fsdp.attention_backward %dy, %qkv, %l, %o {heads = 4 : i64, kv_heads = 2 : i64, impl = #fsdp.attention_impl<blocked>, window = 3 : i64} : (tensor<2x4x8xf32>, tensor<2x4x16xf32>, tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x16xf32>
  // CHECK: fsdp.attention %{{.*}} {heads = 4 : i64, kv_heads = 2 : i64} :
  %z, %zp = fsdp.attention %qkv {heads = 4 : i64, kv_heads = 2 : i64, window = 0 : i64} : (tensor<2x4x16xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4x4xf32>)
  return
}

// Mixture of experts: 2 x 4 tokens, 8 experts, 2 a token (16 pairs) over
// rows of 6, experts of 12 x 6. The router's attributes at their defaults
// (softmax, normalize = true, scale = 1.0) are left out when printed; the
// sort's outputs feed the permute, grouped linears and combine.
// CHECK-LABEL: func.func @moe_ops
func.func @moe_ops(%logits: tensor<2x4x8xf32>, %bias: tensor<8xf32>,
                   %x: tensor<2x4x6xf32>, %w: tensor<8x12x6xf32>,
                   %dh: tensor<16x12xf32>, %dy: tensor<2x4x6xf32>) {
  // CHECK: %[[W:.*]], %[[E:.*]] = fsdp.moe_router %{{[^,]*}} : (tensor<2x4x8xf32>) -> (tensor<2x4x2xf32>, tensor<2x4x2xi32>)
  %w0, %e0 = fsdp.moe_router %logits : (tensor<2x4x8xf32>) -> (tensor<2x4x2xf32>, tensor<2x4x2xi32>)
  // CHECK: fsdp.moe_router %{{[^,]*}} {normalize = false} : (tensor<2x4x8xf32>) -> (tensor<2x4x2xf32>, tensor<2x4x2xi32>)
  %w1, %e1 = fsdp.moe_router %logits {normalize = false} : (tensor<2x4x8xf32>) -> (tensor<2x4x2xf32>, tensor<2x4x2xi32>)
  // DeepSeek-V3's: sigmoid scores, a selection bias, a routed scale.
  // CHECK: %{{.*}}, %[[ES:.*]] = fsdp.moe_router %{{.*}}, %{{.*}} {scale = 2.500000e+00 : f64, scoring = #fsdp.moe_scoring<sigmoid>} : (tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x2xf32>, tensor<2x4x2xi32>)
  %w2, %e2 = fsdp.moe_router %logits, %bias {scoring = #fsdp.moe_scoring<sigmoid>, scale = 2.5} : (tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x2xf32>, tensor<2x4x2xi32>)
  // Every attribute spelled out at its default prints as none.
  // CHECK: fsdp.moe_router %{{[^,]*}} : (tensor<2x4x8xf32>) -> (tensor<2x4x2xf32>, tensor<2x4x2xi32>)
  %w3, %e3 = fsdp.moe_router %logits {scoring = #fsdp.moe_scoring<softmax>, normalize = true, scale = 1.0} : (tensor<2x4x8xf32>) -> (tensor<2x4x2xf32>, tensor<2x4x2xi32>)
  // CHECK: %[[ORDER:.*]], %[[POS:.*]], %[[OFF:.*]] = fsdp.moe_sort %[[E]] {num_experts = 8 : i64} : (tensor<2x4x2xi32>) -> (tensor<2x4x2xi32>, tensor<2x4x2xi32>, tensor<9xi32>)
  %order, %position, %offsets = fsdp.moe_sort %e0 {num_experts = 8} : (tensor<2x4x2xi32>) -> (tensor<2x4x2xi32>, tensor<2x4x2xi32>, tensor<9xi32>)
  // CHECK: %[[XS:.*]] = fsdp.moe_permute %{{.*}}, %[[ORDER]] : (tensor<2x4x6xf32>, tensor<2x4x2xi32>) -> tensor<16x6xf32>
  %xs = fsdp.moe_permute %x, %order : (tensor<2x4x6xf32>, tensor<2x4x2xi32>) -> tensor<16x6xf32>
  // CHECK: fsdp.moe_grouped_linear %[[XS]], %{{.*}}, %[[OFF]] : (tensor<16x6xf32>, tensor<8x12x6xf32>, tensor<9xi32>) -> tensor<16x12xf32>
  %h = fsdp.moe_grouped_linear %xs, %w, %offsets : (tensor<16x6xf32>, tensor<8x12x6xf32>, tensor<9xi32>) -> tensor<16x12xf32>
  // CHECK: fsdp.moe_combine %[[XS]], %[[W]], %[[POS]] : (tensor<16x6xf32>, tensor<2x4x2xf32>, tensor<2x4x2xi32>) -> tensor<2x4x6xf32>
  %y = fsdp.moe_combine %xs, %w0, %position : (tensor<16x6xf32>, tensor<2x4x2xf32>, tensor<2x4x2xi32>) -> tensor<2x4x6xf32>
  // CHECK: %{{.*}}, %[[DW:.*]] = fsdp.moe_combine_backward %{{.*}}, %[[XS]], %[[W]], %[[POS]] : (tensor<2x4x6xf32>, tensor<16x6xf32>, tensor<2x4x2xf32>, tensor<2x4x2xi32>) -> (tensor<16x6xf32>, tensor<2x4x2xf32>)
  %drows, %dweights = fsdp.moe_combine_backward %dy, %xs, %w0, %position : (tensor<2x4x6xf32>, tensor<16x6xf32>, tensor<2x4x2xf32>, tensor<2x4x2xi32>) -> (tensor<16x6xf32>, tensor<2x4x2xf32>)
  // CHECK: %[[DXS:.*]] = fsdp.moe_grouped_linear_grad_input %{{.*}}, %{{.*}}, %[[OFF]] : (tensor<16x12xf32>, tensor<8x12x6xf32>, tensor<9xi32>) -> tensor<16x6xf32>
  %dxs = fsdp.moe_grouped_linear_grad_input %dh, %w, %offsets : (tensor<16x12xf32>, tensor<8x12x6xf32>, tensor<9xi32>) -> tensor<16x6xf32>
  // CHECK: fsdp.moe_grouped_linear_grad_weight %{{.*}}, %[[XS]], %[[OFF]] : (tensor<16x12xf32>, tensor<16x6xf32>, tensor<9xi32>) -> tensor<8x12x6xf32>
  %dw = fsdp.moe_grouped_linear_grad_weight %dh, %xs, %offsets : (tensor<16x12xf32>, tensor<16x6xf32>, tensor<9xi32>) -> tensor<8x12x6xf32>
  // CHECK: fsdp.moe_permute_backward %[[DXS]], %[[POS]] : (tensor<16x6xf32>, tensor<2x4x2xi32>) -> tensor<2x4x6xf32>
  %dx = fsdp.moe_permute_backward %dxs, %position : (tensor<16x6xf32>, tensor<2x4x2xi32>) -> tensor<2x4x6xf32>
  // CHECK: fsdp.moe_router_backward %[[DW]], %{{.*}}, %[[E]] : (tensor<2x4x2xf32>, tensor<2x4x8xf32>, tensor<2x4x2xi32>) -> tensor<2x4x8xf32>
  %dl0 = fsdp.moe_router_backward %dweights, %logits, %e0 : (tensor<2x4x2xf32>, tensor<2x4x8xf32>, tensor<2x4x2xi32>) -> tensor<2x4x8xf32>
  // CHECK: fsdp.moe_router_backward %[[DW]], %{{.*}}, %[[ES]] {normalize = false, scale = 2.500000e+00 : f64, scoring = #fsdp.moe_scoring<sigmoid>} : (tensor<2x4x2xf32>, tensor<2x4x8xf32>, tensor<2x4x2xi32>) -> tensor<2x4x8xf32>
  %dl1 = fsdp.moe_router_backward %dweights, %logits, %e2 {scoring = #fsdp.moe_scoring<sigmoid>, normalize = false, scale = 2.5} : (tensor<2x4x2xf32>, tensor<2x4x8xf32>, tensor<2x4x2xi32>) -> tensor<2x4x8xf32>
  return
}
