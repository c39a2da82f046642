// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

func.func @f() {
  // expected-error @+1 {{a param buffer must name a parameter}}
  %0 = fsdprt.buffer <param> : memref<4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{a activation buffer must not name a parameter}}
  %0 = fsdprt.buffer <activation> param @w : memref<4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{an input position is given exactly for input buffers}}
  %0 = fsdprt.buffer <input> : memref<4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{input position must be non-negative}}
  %0 = fsdprt.buffer <input> input -1 : memref<4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{offset must be a non-negative multiple of 64}}
  %0 = fsdprt.buffer <activation> offset 32 : memref<4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{element type must be f32, i32 or bf16, got 'f64'}}
  %0 = fsdprt.buffer <activation> : memref<4xf64>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{'fsdprt.buffer' op result #0 must be statically shaped memref of any type values}}
  %0 = fsdprt.buffer <activation> : memref<?xf32>
  return
}

// -----

func.func @f(%a: memref<4xf32>) {
  // expected-error @+1 {{unknown kernel 'softmax'}}
  fsdprt.kernel "softmax" ins(%a : memref<4xf32>) outs(%a : memref<4xf32>)
  return
}

// -----

func.func @f(%a: memref<4xf32>) {
  // expected-error @+1 {{kernel 'add' takes 2 inputs, got 1}}
  fsdprt.kernel "add" ins(%a : memref<4xf32>) outs(%a : memref<4xf32>)
  return
}

// -----

func.func @f(%a: memref<4xf32>) {
  // expected-error @+1 {{kernel 'linear' takes 2 to 3 inputs, got 1}}
  fsdprt.kernel "linear" ins(%a : memref<4xf32>) outs(%a : memref<4xf32>)
  return
}

// -----

func.func @f(%a: memref<4xf32>) {
  // expected-error @+1 {{kernel 'gelu' writes 1 outputs, got 2}}
  fsdprt.kernel "gelu" ins(%a : memref<4xf32>) outs(%a, %a : memref<4xf32>, memref<4xf32>)
  return
}

// -----

func.func @f(%a: memref<4xf32>) {
  // expected-error @+1 {{kernel 'fill' needs a numeric parameter 'value'}}
  fsdprt.kernel "fill" outs(%a : memref<4xf32>)
  return
}

// -----

func.func @f(%a: memref<4xf32>) {
  // expected-error @+1 {{kernel 'fill' takes 1 parameters, got 2}}
  fsdprt.kernel "fill" outs(%a : memref<4xf32>) params {value = 1.0 : f32, extra = 2 : i64}
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{must be in the step program (a function marked fsdprt.program)}}
  fsdprt.eval_end
  return
}

// -----

func.func @f() attributes {fsdprt.program} {
  // expected-error @+1 {{needs the program to return its loss buffer}}
  fsdprt.eval_end
  return
}

// -----

func.func @f() -> memref<f32> attributes {fsdprt.program} {
  %loss = fsdprt.buffer <activation> : memref<f32>
  %other = fsdprt.buffer <activation> : memref<f32>
  fsdprt.kernel "fill" outs(%other : memref<f32>) params {value = 1.0 : f32}
  // expected-error @+1 {{follows no kernel that writes the loss}}
  fsdprt.eval_end
  return %loss : memref<f32>
}

// -----

func.func @f() -> memref<f32> attributes {fsdprt.program} {
  %loss = fsdprt.buffer <activation> : memref<f32>
  fsdprt.kernel "fill" outs(%loss : memref<f32>) params {value = 1.0 : f32}
  // expected-error @+1 {{must follow the last kernel that writes the loss; kernel 'fill' below it writes it}}
  fsdprt.eval_end
  fsdprt.kernel "fill" outs(%loss : memref<f32>) params {value = 2.0 : f32}
  return %loss : memref<f32>
}

// -----

func.func @f() -> memref<f32> attributes {fsdprt.program} {
  %loss = fsdprt.buffer <activation> : memref<f32>
  %w = fsdprt.buffer <param> param @w : memref<4xf32>
  fsdprt.kernel "fill" outs(%loss : memref<f32>) params {value = 1.0 : f32}
  fsdprt.kernel "fill" outs(%w : memref<4xf32>) params {value = 0.0 : f32}
  // expected-error @+1 {{ends an evaluation step that changes the training state: kernel 'fill' above it writes a param buffer}}
  fsdprt.eval_end
  return %loss : memref<f32>
}

// -----

func.func @f() -> memref<f32> attributes {fsdprt.program} {
  %loss = fsdprt.buffer <activation> : memref<f32>
  fsdprt.kernel "fill" outs(%loss : memref<f32>) params {value = 1.0 : f32}
  // expected-error @+1 {{is not the only one in the program}}
  fsdprt.eval_end
  fsdprt.eval_end
  return %loss : memref<f32>
}
