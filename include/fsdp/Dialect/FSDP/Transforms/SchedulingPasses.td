//===- SchedulingPasses.td - passes that schedule the step -*- tablegen -*-===//
//
// The passes that choose how the step runs: attention's form and
// recomputation to fit a memory budget, and the schedule of collectives
// (prefetch, buckets, resharding).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_SCHEDULING_PASSES_TD
#define FSDP_SCHEDULING_PASSES_TD

include "mlir/Pass/PassBase.td"

def FsdpFitMemoryPass : Pass<"fsdp-fit-memory", "::mlir::ModuleOp"> {
  let summary = "Choose attention's form and per-unit recomputation to fit a "
                "memory budget";
  let description = [{
    Makes `memory-budget` a goal. On the model before autodiff (after
    `--fsdp-data-parallel`), it compiles trial schedules on copies of the
    module, each through `--fsdp-attention`, `--fsdp-autodiff`,
    `--fsdp-remat`, `--fsdp-shard`, `--fsdp-mixed-precision`,
    `--fsdp-clip-grad` (with `grad-clip` > 0) and `--fsdp-schedule` with
    this pass's schedule, precision and clipping options, and
    measures each one's exact peak per rank (the
    memory profile plus the `runtime`'s share outside the arena, what the
    schedule's budget counts) and its simulated step time (the
    `--fsdp-simulate` cost model on `hardware`, recomputation included).

    The trials form a ladder of ever smaller peaks at ever higher cost:
    attention materialized and nothing recomputed; attention blocked; then
    one unit after another (in forward order) `selective`; then one after
    another `full`. Peaks fall and times rise along it, so a binary search
    finds the first rung that fits in a logarithmic number of compiles
    (about 9 for 96 blocks), which is the one with the lowest simulated
    step time among those the ladder holds. At that rung it tries faster
    schedules one step away from the given one (prefetch depth 1 and 2,
    25 MB buckets, no resharding after the forward, and under expert
    parallelism the all-to-alls overlapped, which holds the split regions'
    values longer: `overlap-all-to-all=false` rules it out) and keeps the
    fastest that fits. The pass then applies its choice: `impl` on every attention,
    `fsdp.remat` on every unit (which `--fsdp-remat` follows),
    `fsdp.schedule_choice` on the module (which `--fsdp-schedule` takes over
    its options), and prints the decision table to stderr (per unit:
    policy, activation bytes it no longer keeps, simulated recompute time).

    When even the last rung (blocked, every unit `full`) does not fit with
    the given schedule, it searches again with the leanest one (no
    prefetch, no buckets, resharding after the forward, the all-to-alls in
    place); when that does not
    fit either, it fails naming the smallest peak and what it is made of.
    Without a budget (`memory-budget=0`) it does nothing.

    Step times are priced on the network `--fsdp-simulate` would use: the
    preset's one level, or with `ranks-per-node` the two-level network of
    `intra-gbps`, `intra-latency-us`, `nic-gbps`, `nics-per-node`,
    `inter-latency-us` and `nic-share` (same options, same defaults, same
    errors), over every rank of the mesh. The report's first line names the
    network (`on h100-nvlink, 2 nodes of 8, NICs shared by groups`).

    With `mesh=auto` the pass picks the mesh too. The world is the
    module's (`--fsdp-mesh` must have run: it gives the ranks); the
    candidates are every replicate=R x shard=S with R x S the world and,
    with `ranks-per-node=G`, S dividing G or a multiple of G. It runs the
    whole search above at each and keeps the fastest simulated step that
    fits; equal steps go to the lower peak, then to the larger S. The
    chosen mesh replaces the module's `fsdp.mesh` and a last line of the
    report names it with every candidate's step:

    ```
      mesh: replicate=2 shard=8 (mesh=auto, of 1x16 501.2 ms 2x8 ... ms
        4x4 ... ms 8x2 ... ms 16x1 (does not fit))
    ```

    When no mesh fits, it fails naming the smallest peak and its mesh.

    With `experts=auto` (a mixture-of-experts model) it picks the expert
    parallelism too: at each mesh (the module's, or each of `mesh=auto`'s)
    the candidates are every expert group size G dividing the shard axis
    and every layer's expert count, each searched as above with its trials
    compiled through `--fsdp-expert-parallel` first (which every trial runs:
    with a given `expert` axis the trials see its exchanges). The fastest
    fit wins as for the mesh, equal steps going to the smaller G; the mesh
    it sets carries the chosen `expert` axis, and the last line names it:

    ```
      mesh: replicate=1 shard=16 expert=8 (experts=auto, of 1x16 ... ms
        1x16 expert=2 ... ms ...)
    ```
  }];
  let options = [
    Option<"memoryBudget", "memory-budget", "::mlir::fsdp::ByteSize", /*default=*/"0",
           "Bytes a rank may use (0: nothing to fit)">,
    Option<"runtime", "runtime", "std::string", /*default=*/"\"cpu\"",
           "Whose memory outside the arena counts: cpu, cuda or none">,
    Option<"hardware", "hardware", "std::string",
           /*default=*/"\"h100-nvlink\"",
           "The cost model's machine (see --fsdp-simulate)">,
    Option<"attention", "attention", "std::string", /*default=*/"\"auto\"",
           "Attention's forms to consider: auto (both), materialized or "
           "blocked">,
    Option<"forwardPrefetch", "forward-prefetch", "int64_t", /*default=*/"0",
           "As --fsdp-schedule's">,
    Option<"backwardPrefetch", "backward-prefetch", "int64_t",
           /*default=*/"0", "As --fsdp-schedule's">,
    Option<"maxInflightGathers", "max-inflight-gathers", "int64_t",
           /*default=*/"0", "As --fsdp-schedule's">,
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"0",
           "As --fsdp-schedule's">,
    Option<"reshardAfterForward", "reshard-after-forward", "bool",
           /*default=*/"true", "As --fsdp-schedule's">,
    Option<"overlapAllToAll", "overlap-all-to-all", "bool",
           /*default=*/"true",
           "Let the search overlap expert parallelism's all-to-alls (a "
           "schedule knob: the split regions hold values longer; false: "
           "always in place)">,
    Option<"paramDtype", "param-dtype", "std::string", /*default=*/"\"\"",
           "As --fsdp-mixed-precision's">,
    Option<"reduceDtype", "reduce-dtype", "std::string",
           /*default=*/"\"f32\"", "As --fsdp-mixed-precision's">,
    Option<"shardCopy", "shard-copy", "bool", /*default=*/"true",
           "As --fsdp-mixed-precision's">,
    Option<"gradClip", "grad-clip", "double", /*default=*/"0",
           "As --fsdp-clip-grad's max-norm (0: no clipping)">,
    Option<"ranksPerNode", "ranks-per-node", "int64_t", /*default=*/"0",
           "As --fsdp-simulate's (0: the preset's one-level network)">,
    Option<"intraGBps", "intra-gbps", "double", /*default=*/"370",
           "As --fsdp-simulate's">,
    Option<"intraLatencyUs", "intra-latency-us", "double", /*default=*/"5",
           "As --fsdp-simulate's">,
    Option<"nicGBps", "nic-gbps", "double", /*default=*/"47",
           "As --fsdp-simulate's">,
    Option<"nicsPerNode", "nics-per-node", "int64_t", /*default=*/"8",
           "As --fsdp-simulate's">,
    Option<"interLatencyUs", "inter-latency-us", "double", /*default=*/"15",
           "As --fsdp-simulate's">,
    Option<"nicShare", "nic-share", "std::string", /*default=*/"\"group\"",
           "As --fsdp-simulate's">,
    Option<"mesh", "mesh", "std::string", /*default=*/"\"\"",
           "auto: choose the mesh RxS of the module's world too (left out: "
           "the module's mesh)">,
    Option<"experts", "experts", "std::string", /*default=*/"\"\"",
           "auto: choose the expert axis (expert parallelism's group size) "
           "too (left out: the module's)">,
    Option<"moeCapacityFactor", "moe-capacity-factor", "double",
           /*default=*/"0.0",
           "As --fsdp-expert-parallel's capacity-factor, for the trials">,
    Option<"moeOverflow", "moe-overflow", "std::string",
           /*default=*/"\"fail\"",
           "As --fsdp-expert-parallel's overflow, for the trials">
  ];
}

def FsdpSchedulePass : Pass<"fsdp-schedule", "::mlir::ModuleOp"> {
  let summary = "Make collectives asynchronous and prefetch gathers";
  let description = [{
    Turns every collective of a sharded `@train_step` into a start/wait pair
    linked by a `!fsdp.token`: all-gathers on stream 1, reduce-scatters on
    stream 2, apart from compute (stream 0). Waits sit right before the
    first use of the result. Then:

    * `forward-prefetch=k`: the all-gather of the forward region k regions
      ahead starts before the current region computes;
    * `backward-prefetch=k`: likewise in the backward, so the next unit's
      all-gather is issued before the current unit's reduce-scatter;
    * `max-inflight-gathers=K` (like PyTorch's `limit_all_gathers`, but
      decided at compile time): a start that would put more than K gathers
      in flight (started and not yet freed) moves later, to the first
      point where one has been freed; 0 means no limit;
    * `reshard-after-forward=false`: a unit's parameters gathered for its
      last forward region stay gathered until its backward is done, and
      the backward regions use them instead of gathering again (PyTorch's
      SHARD_GRAD_OP, ZeRO-2): one all-gather per unit per step fewer, at
      the cost of holding every unit's full parameters from forward to
      backward (the memory report and the plan show it);
    * `bucket-bytes=B`: consecutive collectives of small units are merged
      into buckets of up to B bytes (gathered, or full-size gradient,
      bytes; a unit larger than B is a bucket of its own): the gathers of
      a bucket start together where its first one started and are all
      awaited where its first one was; the reduce-scatters of a bucket
      start together where its last one started, so a bucket closes
      before a reduce-scatter that starts after a shard of the bucket is
      read (a unit the loss ignores is reduced where its AdamW is, after
      the optimizer steps of the units before it). The later starts of a
      bucket are `grouped`: the runtime issues each bucket as one fused
      collective (an NCCL group; back to back on an MPI stream thread),
      paying the collective's latency once; the in-flight limit counts a
      bucket as one gather. Larger buckets hold memory longer (the memory
      report and the plan show it); 0 (the default) keeps one collective
      per unit;
    * `memory-budget=B`: fails, naming the peak, the budget and the op
      where the peak occurs, when a rank would need more than B bytes:
      the step's peak plus what the runtime named by `runtime=` holds
      outside the arena (`cpu`, the default: MPI, the batch buffers, the
      plan's tables on the host; `cuda`: the CUDA context, cuBLAS's
      workspace and NCCL's buffers on the device; `none`: the peak alone),
      the figures `--fsdp-memory-report` lists line by line.

    Gradient clipping's `fsdp.all_reduce_sum` (`--fsdp-clip-grad`) stays
    synchronous, where it is: one scalar, which the optimizer needs at once.
    The reduce-scatters' waits come before the first read of their shards,
    the clipping's sums of squares among them, so they stay as late as
    without clipping.

    Prefetching moves starts only: it never changes what is computed, so
    the losses are the unscheduled plan's, bit for bit.

    Before:
    ```mlir
    %g1 = fsdp.all_gather @l1 : tensor<27xf32>
    %y = fsdp.compute @l1 forward ins(%x, %g1 : ...) { ... }
    fsdp.free %g1 : tensor<27xf32>
    ```
    After (no prefetch):
    ```mlir
    %t, %g1 = fsdp.all_gather_start @l1 stream 1 : tensor<27xf32>
    fsdp.wait %t
    %y = fsdp.compute @l1 forward ins(%x, %g1 : ...) { ... }
    fsdp.free %g1 : tensor<27xf32>
    ```
    With `bucket-bytes=256`, two small units' gathers as one bucket:
    ```mlir
    %t1, %g1 = fsdp.all_gather_start @l1 stream 1 : tensor<27xf32>
    %t2, %g2 = fsdp.all_gather_start @l2 stream 1 grouped : tensor<27xf32>
    fsdp.wait %t1
    fsdp.wait %t2
    %y = fsdp.compute @l1 forward ins(%x, %g1 : ...) { ... }
    fsdp.free %g1 : tensor<27xf32>
    %z = fsdp.compute @l2 forward ins(%y, %g2 : ...) { ... }
    ```

    Expert parallelism's row exchanges (`fsdp.all_to_all`, after
    `--fsdp-expert-parallel`) become `fsdp.all_to_all_start` on stream 4,
    of their own, each waited for right before the first op that reads
    what it received (`overlap-all-to-all=false` leaves them in place,
    blocking: the baseline the overlap is measured against). The compute
    between start and wait runs while the rows travel, and the pass puts
    there what does not depend on the exchange: the region before a start
    is split so that what the exchange does not need (a backward's weight
    gradients, a shared expert's backward) runs after the start, with the
    pack, reduce-scatter, frees and waits that follow it; the region after
    a wait is split so that what does not read the received rows (a
    shared expert, the router's backward) runs before the wait. Both parts
    of a split read the one gather of their unit. The counts' exchange
    (`fsdp.all_to_all_counts`) stays where it is: the rows' sizes need it
    at once. A forward return beside DeepSeek-V3's shared expert, after:
    ```mlir
    %t, %home = fsdp.all_to_all_start %ys, %recv, %counts stream 4 over "expert" : (...) -> tensor<128x64xf32>
    %s = fsdp.compute @layers.1 forward ins(%h, %g : ...) { ... }   // the shared expert
    fsdp.wait %t
    %y = fsdp.compute @layers.1 forward ins(%home, %s, ... : ...) { ... }  // the combine
    ```

    Hybrid sharding's replica all-reduces (`fsdp.all_reduce_mean`) get
    stream 3, of their own, so that one never queues behind a
    reduce-scatter or a gather of the shard group. Their in-flight rule:
    each starts right after its unit's reduce-scatter has been waited for
    (its input is complete there, wherever bucketing or the reduce-scatter
    rule put that wait), and at most one is in flight: it is waited for
    just before the next one starts, or before the first read of its
    shard (the optimizer, or clipping's sum of squares), whichever comes
    first. So the all-reduce of unit i overlaps the backward and the
    reduce-scatter of unit i - 1, as the reduce-scatters overlap the
    backward; replica all-reduces are never bucketed. The reduce-scatter's
    own wait ignores its all-reduce as a read (it follows the wait) and
    counts the reads of the averaged shard instead:
    ```mlir
    %t2, %s2 = fsdp.reduce_scatter_start %f2 @l2 stream 2 over "shard" : ...
    ...
    fsdp.wait %t2
    %a2, %m2 = fsdp.all_reduce_mean_start %s2 @l2 stream 3 over "replicate" : tensor<325xf32>
    %t1, %s1 = fsdp.reduce_scatter_start %f1 @l1 stream 2 over "shard" : ...
    ...
    fsdp.wait %t1
    fsdp.wait %a2
    %a1, %m1 = fsdp.all_reduce_mean_start %s1 @l1 stream 3 over "replicate" : tensor<2080xf32>
    ```
  }];
  let options = [
    Option<"forwardPrefetch", "forward-prefetch", "int64_t", /*default=*/"0",
           "Forward regions ahead whose gathers start early">,
    Option<"backwardPrefetch", "backward-prefetch", "int64_t",
           /*default=*/"0",
           "Backward regions ahead whose gathers start early">,
    Option<"maxInflightGathers", "max-inflight-gathers", "int64_t",
           /*default=*/"0", "Gathers allowed in flight (0: no limit)">,
    Option<"memoryBudget", "memory-budget", "::mlir::fsdp::ByteSize", /*default=*/"0",
           "Bytes a rank may use (0: no budget)">,
    Option<"runtime", "runtime", "std::string", /*default=*/"\"cpu\"",
           "The runtime whose memory outside the arena the budget counts: "
           "cpu, cuda or none">,
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"0",
           "Merge consecutive collectives into buckets of up to this many "
           "bytes (0: one collective per unit)">,
    Option<"reshardAfterForward", "reshard-after-forward", "bool",
           /*default=*/"true",
           "Free gathered parameters after each forward region">,
    Option<"overlapAllToAll", "overlap-all-to-all", "bool",
           /*default=*/"true",
           "Start expert parallelism's row all-to-alls on stream 4, waited "
           "for at their first read (false: they block where they stand)">
  ];
}

#endif // FSDP_SCHEDULING_PASSES_TD
