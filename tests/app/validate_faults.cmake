# Proof that validate can fail: each planted fault (--inject-fault, kernels/fault_injection.h)
# must turn the named check into FAIL and exit 1. Small topologies keep the set fast; a fault
# that needs a degree > 1 to show gets it. The runs pin --device cpu: the kernel faults sit in
# the CPU loops and the comm faults in algorithms that only host buffers take, so on a machine
# with a GPU, --device auto would run CUDA code that has none of them.
# Fields: fault | ranks | tp pp dp | extra flags | the check that must FAIL (a regex; "." stands
# for a parenthesis) | a second regex that must appear
set(fault_runs
  "copy-to-tp-no-all-reduce|8|2 2 2||TP: training loss and gradients|FAIL  TP: transformer block forward and gradients"
  "row-bias-every-rank|8|2 2 2||TP: inference forward|FAIL  COMBINED .1 micro-batch.: GPT loss and gradients"
  "dp-sum-not-average|8|2 2 2||DP: averaged gradients|FAIL  COMBINED .2 micro-batches, 1f1b.: GPT loss and gradients"
  # The GPT's own rules: the tied embedding's copies on the first and last stage, and the
  # vocab-parallel loss's shared row max.
  "embedding-group-not-reduced|4|2 2 1||COMBINED .1 micro-batch.: GPT loss and gradients|PASS  TP: vocab-parallel embedding"
  "vocab-ce-local-max|2|2 1 1||TP: vocab-parallel embedding and cross-entropy|PASS  TP: transformer block"
  # Sequence parallelism's rule: the LayerNorms' gradients summed over TP. Plain TP is untouched.
  "sp-layer-norm-grad-not-summed|4|2 2 1||TP+SP: transformer block forward and gradients|FAIL  COMBINED.SP .2 micro-batches, 1f1b.: GPT loss and gradients"
  "pp-gradient-not-sent|8|2 2 2||PP .1 micro-batch.: loss and every stage gradient|"
  # An interleaved chunk on the wrong stage: only the interleaved GPT check runs chunks.
  "pp-chunk-wrong-stage|2|1 2 1||COMBINED .2 micro-batches, 1f1b, 2 virtual stages.: GPT loss and gradients|PASS  COMBINED .2 micro-batches, 1f1b.: GPT loss and gradients"
  # The distributed optimizer: only its own check runs the step with it, so every other passes.
  "distributed-optimizer-wrong-shard|4|1 2 2||DP: distributed optimizer .ZeRO-1. AdamW steps|PASS  COMBINED .1 micro-batch.: GPT loss and gradients"
  "distributed-optimizer-no-all-gather|4|1 2 2||DP: distributed optimizer .ZeRO-1. AdamW steps|PASS  DP: averaged gradients"
  # Class 5: every TP gradient entry stays below --atol 1e-3, so only the scale-aware
  # max_rel_error test sees the 5 % error.
  "tp-input-grad-off-5-percent|4|2 2 1|--atol 1e-3|TP: training loss and gradients|max_rel_error=5.000e-02"
  # Class 2: invisible at 1 micro-batch, caught at 2.
  "micro-batch-loss-weight-1|4|2 2 1||PP .2 micro-batches, 1f1b.: loss and every stage gradient|FAIL  PP .2 micro-batches, afab.: loss"
  # Class 3.
  "all-gather-rank-order-reversed|4|2 2 1||COMM: tp all-reduce|FAIL  COMM: TP mappings"
  "chunk-tail-dropped|4|2 2 1||COMM: all of the above in 3-element messages|PASS  COMM: world all-reduce"
  # Only the every-algorithm check forces the ring (the built-in rule takes it for large buffers).
  "ring-all-reduce-overwrites|4|2 2 1||COMM: every algorithm|PASS  COMM: world all-reduce"
  "ring-all-gather-wrong-block|4|4 1 1||COMM: every algorithm|PASS  COMM: all of the above in 3-element"
  # Class 1: the dense reference shares these kernels, so only the KERNELS checks see them.
  "gelu-grad-no-x-phi|2|2 1 1||KERNELS: GELU|PASS  TP: training loss"
  # The float64 path of a kernel: only the KERNELS checks' float64 run sees it.
  "gelu-f64-grad-no-x-phi|2|2 1 1||KERNELS: GELU|PASS  TP: training loss"
  "softmax-backward-no-row-dot|2|2 1 1||KERNELS: softmax|"
  "attention-scale-head-dim|2|2 1 1||KERNELS: linear, matmul and attention core|PASS  TP: attention"
  "non-leaf-grad-overwritten|2|2 1 1||KERNELS: backward engine|"
  # The GPT's kernels: the transformer block's and the GPT's dense references run them too.
  "layer-norm-dx-no-mean|2|2 1 1||KERNELS: LayerNorm forward and backward|PASS  TP: transformer block forward and gradients"
  # The causal softmax is the dense references' attention only (the model runs the fused
  # kernel), so the transformer block check sees it too.
  "causal-mask-one-late|2|2 1 1||KERNELS: causal and scaled softmax|FAIL  TP: transformer block forward and gradients"
  # The fused attention's online softmax: validate's models (seq 16) fit one key block, where no
  # rescale happens, so only the KERNELS check's two-block rows see it.
  "flash-attention-no-rescale|2|2 1 1||KERNELS: fused causal attention|PASS  TP: transformer block forward and gradients"
  # The Llama family's kernels: the llama GPT and its dense reference run the same kernel, so
  # only their own KERNELS check fails (test_gpt_mpi's PyTorch golden sees them in the model).
  "rms-norm-eps-outside-root|1|1 1 1||KERNELS: RMSNorm forward and backward|PASS  KERNELS: LayerNorm"
  "rotary-adjacent-pairs|1|1 1 1||KERNELS: rotary position embedding|PASS  KERNELS: RMSNorm"
  "swiglu-grad-no-silu-term|1|1 1 1||KERNELS: SwiGLU|PASS  KERNELS: rotary position embedding"
  # The bfloat16 kernels: nothing else in validate runs them yet.
  "bf16-round-truncates|2|2 1 1||KERNELS: bfloat16 conversion|PASS  TP: transformer block forward and gradients"
  "bf16-gemm-overwrites|2|2 1 1||KERNELS: bfloat16 GEMM|PASS  KERNELS: bfloat16 conversion"
  # Gradients accumulated in bfloat16 stay within the bf16 GPT check's tolerance of the dense
  # reference; only the main-gradient check, which compares equal products, sees them.
  "bf16-main-grad-in-bf16|2|2 1 1||COMBINED bf16 .2 micro-batches, 1f1b.: float32 main gradients|PASS  COMBINED.SP bf16"
  # Context parallelism: its checks build a cp ring of the whole world. Swapped chunks break
  # the round trip and the attention; a merge without the log-sum-exp correction breaks the
  # attention (the ring and the all-gather share it); gradients that never reach their owner
  # break the ring (the all-gather then differs from it too).
  "cp-zigzag-chunks-swapped|2|2 1 1||CP: zigzag shards round trip|FAIL  CP: ring attention forward and backward"
  "ring-attention-no-lse-correction|2|2 1 1||CP: ring attention forward and backward|PASS  CP: zigzag shards"
  "ring-attention-dkv-not-returned|4|2 1 2||CP: ring attention forward and backward|PASS  CP: zigzag shards")
foreach(run IN LISTS fault_runs)
  string(REPLACE "|" ";" fields "${run}")
  list(GET fields 0 fault)
  list(GET fields 1 np)
  list(GET fields 2 topology)
  list(GET fields 3 extra)
  list(GET fields 4 check)
  list(GET fields 5 also)
  separate_arguments(topology)
  separate_arguments(extra)
  list(GET topology 0 tp)
  list(GET topology 1 pp)
  list(GET topology 2 dp)
  string(REPLACE "+" "\\+" check "${check}")
  set(expect "FAIL  ${check}" "one or more parallel validations FAILED")
  if(also)
    list(APPEND expect "${also}")
  endif()
  mpitron_add_expect_test(validate_fault_${fault} TARGET mpitron NP ${np} TIMEOUT 240
    ARGS validate --device cpu --tp ${tp} --pp ${pp} --dp ${dp} ${extra} --inject-fault ${fault}
         --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_fault
    EXPECT_EXIT 1 EXPECT_OUTPUT ${expect})
endforeach()

# Class 4: a check whose degree is 1 is labelled trivial, and rightly so: the DP fault cannot
# show at dp 1.
mpitron_add_expect_test(validate_trivial_at_degree_1 TARGET mpitron NP 2 TIMEOUT 240
  ARGS validate --tp 2 --pp 1 --dp 1 --inject-fault dp-sum-not-average
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_fault
  EXPECT_EXIT 0
  EXPECT_OUTPUT "PASS \\(dp 1: trivially equal\\)  DP: averaged gradients"
                "PASS \\(pp 1: trivially equal\\)  PP \\(1 micro-batch\\)"
                "PASS  PP \\(2 micro-batches, 1f1b\\)" "PASS  TP: training loss"
  REJECT_OUTPUT "trivially equal\\)  TP:")
