//===- AnalysisPasses.td - passes that report on the step --*- tablegen -*-===//
//
// The passes that read the step and change nothing: the simulated step
// time, the memory report, the structural checks and the summary.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_ANALYSIS_PASSES_TD
#define FSDP_ANALYSIS_PASSES_TD

include "mlir/Pass/PassBase.td"

def FsdpSimulatePass : Pass<"fsdp-simulate", "::mlir::ModuleOp"> {
  let summary = "Predict step time and exposed communication of a schedule";
  let description = [{
    A cost model of the scheduled `@train_step` (after `--fsdp-schedule`)
    on one rank of N, changing nothing. Three streams: compute runs the
    model ops in program order, each taking max(FLOPs / compute rate,
    bytes moved / memory bandwidth); stream 1 runs all-gathers and stream 2
    reduce-scatters in issue order, each taking latency + bytes x (N - 1) /
    N / bus bandwidth (nccl-tests' bus bandwidth, bytes being the full flat
    tensor); a collective starts when it is issued and its stream is free,
    and `fsdp.wait` holds the compute stream until it ends. Gradient
    clipping's `fsdp.all_reduce_sum` (one scalar) runs on the compute
    stream where it stands, taking latency + 2 x bytes x (N - 1) / N / bus
    bandwidth (an all-reduce's bus bytes). Prints the
    predicted step time, compute time, exposed communication (step time
    not covered by compute) and the per-rank peak memory, and with
    `trace=<file>` writes the timeline as a Chrome trace (JSON; opens in
    Perfetto or chrome://tracing) with one lane per stream, and memory
    counter tracks (`"ph": "C"`) of one rank (every rank holds the same up
    to one element per unit): `memory by kind` (parameters, gradients,
    optimizer, gathered, activations: the `--fsdp-memory-report`
    profile's live bytes at each op, shards and full-size gradients
    together under gradients), `memory total` (their sum, whose maximum is
    the report's peak), and with `memory-budget=B` a constant `memory
    budget` track. An op's sample is placed where the compute stream issues
    it: a gathered buffer counts from its gather's start, before the
    bytes arrive.

    Hardware presets: `h100-nvlink` (bus 370 GB/s, 5 us latency) and
    `ib-400g` (400 Gb/s InfiniBand: bus 47 GB/s per GPU, 15 us), both with
    400 TFLOP/s of sustained dense compute for GEMMs of f32 operands (TF32
    tensor cores), twice that for bf16 operands (`--fsdp-mixed-precision`;
    the ratio of H100's dense peaks), and 3000 GB/s of memory bandwidth;
    any of the rates can be overridden (`compute-tflops` sets the f32 rate,
    bf16 keeping the ratio). Bytes are the types': a bf16 gather moves half
    an f32 one's.

    A two-level network (`ranks-per-node=G`): ranks are laid out node by
    node, G to a node, and each collective's cost comes from the level its
    group crosses. A ring inside one node runs on the node's bus
    (`intra-gbps`, NVLink's 370 GB/s bus bandwidth, `intra-latency-us` 5);
    a ring that leaves a node is as slow as its slowest link. By default
    (`nic-share=group`) that is its group's members' share of the node's
    NICs (`nics-per-node` x `nic-gbps` / G per member on the node, 8 x 47
    GB/s for 8 x 400G InfiniBand): NCCL spreads one communicator's
    channels over the NICs of a node, so a world ring of 8 ranks a node
    runs at up to 8 x 47 GB/s (capped by the bus) and a replica group with
    one member a node at 47 GB/s, with `inter-latency-us` (15).
    `nic-share=rank` gives every ring only a rank's share (47 GB/s at
    G = 8), the pessimistic bound; docs/overlap.md gives the evidence for
    the default.
    The bus-bandwidth formulas stay nccl-tests';
    a group is (size, stride between its ranks), today every collective's
    the whole world (N, 1). The hardware preset then gives the compute and
    memory rates only, and its `bus-gbps` and `latency-us` do not apply
    (the pass rejects them with `ranks-per-node`, and the two-level options
    without it). A second line of the report says how many collectives ran
    inside a node and across nodes, and how long they took:

    ```
    fsdp-simulate: h100-nvlink, world size 16 on 2 nodes of 8 (inside a
      node 370 GB/s, across nodes 8 x 47 GB/s NICs, shared by groups):
      step ...
      collectives: 0 inside a node (0.000 ms), 123 across nodes (... ms)
    ```

    ```
    fsdp-simulate: h100-nvlink, world size 8: step 41.2 ms, compute 38.9 ms,
      exposed communication 2.3 ms (5.6%), peak 26.8 GB per rank
    ```
  }];
  let options = [
    Option<"hardware", "hardware", "std::string", /*default=*/"\"h100-nvlink\"",
           "Preset: h100-nvlink or ib-400g">,
    Option<"computeTflops", "compute-tflops", "double", /*default=*/"0",
           "Sustained compute of f32 GEMMs, TFLOP/s (0: the preset's; "
           "bf16 runs at twice it)">,
    Option<"busGBps", "bus-gbps", "double", /*default=*/"0",
           "Collective bus bandwidth, GB/s (0: the preset's)">,
    Option<"memoryGBps", "memory-gbps", "double", /*default=*/"0",
           "Memory bandwidth, GB/s (0: the preset's)">,
    Option<"latencyUs", "latency-us", "double", /*default=*/"-1",
           "Collective latency, microseconds (-1: the preset's)">,
    Option<"tracePath", "trace", "std::string", /*default=*/"\"\"",
           "Write the predicted timeline here (Chrome trace JSON)">,
    Option<"ranksPerNode", "ranks-per-node", "int64_t", /*default=*/"0",
           "Ranks on one node of a two-level network (0: one level, the "
           "preset's bus for every collective)">,
    Option<"intraGBps", "intra-gbps", "double", /*default=*/"370",
           "Two-level: bus bandwidth inside a node, GB/s (NVLink)">,
    Option<"intraLatencyUs", "intra-latency-us", "double", /*default=*/"5",
           "Two-level: latency of a collective inside a node, us">,
    Option<"nicGBps", "nic-gbps", "double", /*default=*/"47",
           "Two-level: bandwidth of one NIC, GB/s (400G InfiniBand)">,
    Option<"nicsPerNode", "nics-per-node", "int64_t", /*default=*/"8",
           "Two-level: NICs of one node">,
    Option<"interLatencyUs", "inter-latency-us", "double", /*default=*/"15",
           "Two-level: latency of a collective across nodes, us">,
    Option<"nicShare", "nic-share", "std::string", /*default=*/"\"group\"",
           "Two-level: a ring across nodes gets its group's members' share "
           "of the node's NICs (group, NCCL's channels) or one rank's "
           "(rank)">,
    Option<"memoryBudget", "memory-budget", "::mlir::fsdp::ByteSize",
           /*default=*/"0",
           "A budget to draw as a constant memory track (0: none)">
  ];
}

def FsdpMemoryReportPass : Pass<"fsdp-memory-report", "::mlir::ModuleOp"> {
  let summary = "Report what every rank holds, from the sharded IR";
  let description = [{
    An analysis of the sharded `@train_step` (after `--fsdp-shard`) that
    changes nothing and allocates nothing: it reads only types. Prints, to
    stderr, for one rank (all ranks hold the same up to one element per
    unit): parameter, gradient and AdamW shards, the steady state, the
    largest gathered unit, and the forward and backward peaks with what is
    live there (steady state, gathered parameters, full-size unit
    gradients, activations) and where they occur; next to each, the seed's
    formula (4P/N, 4P/N, 8P/N, 16P/N, and 16P/N + 4P/M + activations for
    the forward peak of M equal units), the DDP baseline 16P, and the
    totals over the N ranks. Bytes are exact; GB are 10^9 bytes, as the
    seed counts.

    Lifetimes follow program order: a gathered parameter lives from its
    all-gather to its free, a unit's full-size gradient from the first
    kernel that writes a part of it to its free after the reduce-scatter,
    any other value from its definition to its last use; shards live
    throughout.

    ```
    fsdp-memory-report: world size 8, 41 units, 12759910400 parameters (P), f32
      steady state       25519820800 bytes   25.520 GB   16P/N = 25.520 GB
      ...
    ```
  }];
}

def FsdpVerifyPass : Pass<"fsdp-verify", "::mlir::ModuleOp"> {
  let summary = "Check the FSDP contract of a sharded training step";
  let description = [{
    A contract pass between stages (in the spirit of torch-mlir's backend
    contracts): it changes nothing and fails, with a diagnostic pointing at
    the offending op, when the sharded `@train_step` breaks a rule the
    runtime relies on:

    * a gathered parameter or packed gradient used after its `fsdp.free`,
      freed twice, or never freed;
    * a parameter of a sharded unit read without gathering it (an
      `fsdp.load` left in the step, or a view of something that is not the
      region unit's all-gather);
    * a unit whose AdamW does not consume exactly one reduce-scatter of
      that unit (a missing reduce-scatter), or a unit reduce-scattered
      twice;
    * a collective nested in a region: inside control flow it could run a
      different number of times on different ranks, and a collective
      sequence that differs between ranks hangs the job;
    * gradient clipping (`--fsdp-clip-grad`) that is not by the global
      norm: an AdamW without the scale the others have, a scale that is no
      `fsdp.clip_coefficient`, a coefficient of a sum of squares that is
      not all-reduced (each rank would clip by its own norm), or a chain of
      `fsdp.grad_sq_sum` that leaves out a unit, sums one twice, or sums a
      tensor that is not the unit's reduce-scattered shard.

    * hybrid sharding (a mesh with a `replicate` axis): a collective that
      names no group, a replica all-reduce on a mesh without replicas or
      of a tensor that is not its unit's reduce-scattered shard, a unit
      averaged twice, or an AdamW that reads a shard not averaged over
      the replicas (the replicas would drift apart). The ops' verifiers
      reject a gather, reduce-scatter or clipping sum over "replicate", a
      replica all-reduce over "shard", and a bucket whose members name
      different groups.

    The collectives of a step that passes are a fixed, rank-independent
    sequence: the program has no rank-dependent value and no control flow.
    So every collective of a group is issued by all the group's members
    in the same order (program order), on the same stream, for every
    group of the mesh: all members of a shard group, and of a replica
    group, run this one program, each collective names the one group the
    mesh gives it, and a bucket (one fused collective) runs over one group.
  }];
}

def FsdpSummaryPass : Pass<"fsdp-summary", "::mlir::ModuleOp"> {
  let summary = "Print a table of units, parameters and regions";
  let description = [{
    An analysis that changes nothing: prints, to stderr, one row per unit
    with its parameter count, elements, bytes, number of forward and
    backward regions (in `@train_step` once it exists) and, after lowering,
    number of kernel calls; then the totals and the op count of each
    function.

    ```
    fsdp-summary: 2 units, 4 parameters, 67 elements, 268 bytes
      unit           params      elements         bytes  fwd  bwd kernels
      @layers.0           2            40           160    1    1       0
      ...
    ```
  }];
}

#endif // FSDP_ANALYSIS_PASSES_TD
