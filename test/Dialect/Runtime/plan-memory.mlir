// RUN: fsdp-opt %s --fsdp-plan-memory=report 2>%t.report | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT < %t.report

// Persistent buffers (inputs, parameters, moments) come first, in order,
// 64-byte aligned. Temporaries share space when their lifetimes are
// disjoint: %a (kernels 0-1), %c (kernel 2) and %l (kernel 3 to the end)
// get the same offset, %b (kernels 1-2) overlaps the first two. The unused
// %dead is removed.
// CHECK-LABEL: func.func @train_step()
// CHECK-SAME: fsdprt.arena_size = 768 : i64
// CHECK-SAME: fsdprt.peak = {activations = 512 : i64, bytes = 768 : i64, gathered = 0 : i64, grads = 0 : i64, inputs = 64 : i64, kernel = 1 : i64, optimizer = 128 : i64, params = 64 : i64, scratch = 0 : i64}
// CHECK-NEXT: fsdprt.buffer <input> input 0 offset 0 : memref<16xf32>
// CHECK-NEXT: fsdprt.buffer <param> param @p offset 64 : memref<16xf32>
// CHECK-NEXT: fsdprt.buffer <adam_m> param @p offset 128 : memref<16xf32>
// CHECK-NEXT: fsdprt.buffer <adam_v> param @p offset 192 : memref<16xf32>
// CHECK-NEXT: fsdprt.buffer <activation> offset 256 : memref<64xf32>
// CHECK-NEXT: fsdprt.buffer <activation> offset 512 : memref<64xf32>
// CHECK-NEXT: fsdprt.buffer <activation> offset 256 : memref<64xf32>
// CHECK-NEXT: fsdprt.buffer <activation> offset 256 : memref<f32>
// CHECK-NOT: fsdprt.buffer

// REPORT: fsdp-plan-memory: @train_step, 4 kernels, 8 buffers
// REPORT-NEXT: arena 768 bytes
// REPORT-NEXT: peak live 768 bytes {{.*}} at kernel #1 (add)
// REPORT-NEXT: params 64 bytes
// REPORT-NEXT: grads 0 bytes
// REPORT-NEXT: optimizer 128 bytes
// REPORT-NEXT: activations 512 bytes
// REPORT-NEXT: scratch 0 bytes
// REPORT-NEXT: gathered 0 bytes
// REPORT-NEXT: inputs 64 bytes

fsdp.param @p : tensor<16xf32> init <zeros>
func.func @train_step() -> memref<f32> attributes {fsdprt.program} {
  %x = fsdprt.buffer <input> input 0 : memref<16xf32>
  %p = fsdprt.buffer <param> param @p : memref<16xf32>
  %m = fsdprt.buffer <adam_m> param @p : memref<16xf32>
  %v = fsdprt.buffer <adam_v> param @p : memref<16xf32>
  %a = fsdprt.buffer <activation> : memref<64xf32>
  %b = fsdprt.buffer <activation> : memref<64xf32>
  %c = fsdprt.buffer <activation> : memref<64xf32>
  %dead = fsdprt.buffer <activation> : memref<1024xf32>
  %l = fsdprt.buffer <activation> : memref<f32>
  fsdprt.kernel "fill" outs(%a : memref<64xf32>) params {value = 1.0 : f32}
  fsdprt.kernel "add" ins(%a, %a : memref<64xf32>, memref<64xf32>) outs(%b : memref<64xf32>)
  fsdprt.kernel "add" ins(%b, %b : memref<64xf32>, memref<64xf32>) outs(%c : memref<64xf32>)
  fsdprt.kernel "fill" outs(%l : memref<f32>) params {value = 0.0 : f32}
  return %l : memref<f32>
}
