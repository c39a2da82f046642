// RUN: fsdp-opt %s --fsdp-plan-memory | FileCheck %s

// A view of a view keeps the buffer under both alive: %g is read through
// %v2 (a view of the view %v1) at kernel 3, so %t (kernels 1-2) may not
// share its memory, although %g itself is named only at kernel 0.
// CHECK-LABEL: func.func @train_step()
// CHECK-SAME: fsdprt.arena_size = 576 : i64
// CHECK-NEXT: fsdprt.buffer <input> input 0 offset 0 : memref<16xf32>
// CHECK-NEXT: fsdprt.buffer <activation> offset 64 : memref<64xf32>
// CHECK-NEXT: fsdprt.buffer <activation> offset 320 : memref<64xf32>
// CHECK-NEXT: fsdprt.buffer <activation> offset 320 : memref<16xf32>
// CHECK-NEXT: fsdprt.buffer <activation> offset 64 : memref<f32>
func.func @train_step() -> memref<f32> attributes {fsdprt.program} {
  %x = fsdprt.buffer <input> input 0 : memref<16xf32>
  %g = fsdprt.buffer <activation> : memref<64xf32>
  %t = fsdprt.buffer <activation> : memref<64xf32>
  %out = fsdprt.buffer <activation> : memref<16xf32>
  %l = fsdprt.buffer <activation> : memref<f32>
  %v1 = fsdprt.view %g[16] : memref<64xf32> -> memref<32xf32>
  %v2 = fsdprt.view %v1[8] : memref<32xf32> -> memref<16xf32>
  fsdprt.kernel "fill" outs(%g : memref<64xf32>) params {value = 1.0 : f32}
  fsdprt.kernel "fill" outs(%t : memref<64xf32>) params {value = 2.0 : f32}
  fsdprt.kernel "add" ins(%t, %t : memref<64xf32>, memref<64xf32>) outs(%t : memref<64xf32>)
  fsdprt.kernel "add" ins(%v2, %x : memref<16xf32>, memref<16xf32>) outs(%out : memref<16xf32>)
  fsdprt.kernel "fill" outs(%l : memref<f32>) params {value = 0.0 : f32}
  return %l : memref<f32>
}
