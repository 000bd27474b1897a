# `mpitron bench gpt` (docs/context-parallel.md#measuring): at cp 2 on 2 ranks with tiny sizes,
# its JSON line holds every figure, a value per rank, and a finite balance (bench_gpt_json.py).
_mpitron_mpiexec_command(bench_gpt_launch 2 mpitron bench gpt --cp 2 --layers 1 --hidden 32
  --heads 2 --vocab 64 --seq 16 --micro-batches 2 --steps 2 --warmup 1
  --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_bench)
add_test(NAME bench_gpt_cp2_json
         COMMAND Python3::Interpreter ${CMAKE_CURRENT_SOURCE_DIR}/bench_gpt_json.py
                 ${CMAKE_CURRENT_BINARY_DIR}/bench_gpt_cp2.jsonl -- ${bench_gpt_launch})
set_tests_properties(bench_gpt_cp2_json PROPERTIES TIMEOUT 120 PROCESSORS 2)
# --bf16: train --bf16's step (bfloat16 GEMMs and parameters, float32 masters, the bfloat16
# pipeline wire at pp 2), named in the header line.
mpitron_add_expect_test(bench_gpt_bf16_pp2 TARGET mpitron NP 2 TIMEOUT 120 MAX_SECONDS 60
  ARGS bench gpt --bf16 --pp 2 --layers 2 --hidden 32 --heads 2 --vocab 64 --seq 16 --steps 2
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_bench_bf16
  EXPECT_EXIT 0 EXPECT_OUTPUT "1 micro-batch of 1 sequence, bf16; cp-comm ring\nbench gpt: [0-9.]+ ms/step")
# --sequence-parallel: train --sequence-parallel's step at tp 2, named in the header line.
mpitron_add_expect_test(bench_gpt_sequence_parallel_tp2 TARGET mpitron NP 2 TIMEOUT 120 MAX_SECONDS 60
  ARGS bench gpt --bf16 --tp 2 --sequence-parallel --layers 1 --hidden 32 --heads 2 --vocab 64
       --seq 16 --steps 2 --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_bench_sp
  EXPECT_EXIT 0
  EXPECT_OUTPUT "1 micro-batch of 1 sequence, sequence parallel, bf16; cp-comm ring\nbench gpt: [0-9.]+ ms/step")
# --beside-float32: a float32 trainer's steps alternate with the bf16 ones after the figures above
# (tp 2, every rank timing between barriers); without --bf16 it is refused.
mpitron_add_expect_test(bench_gpt_beside_float32_tp2 TARGET mpitron NP 2 TIMEOUT 120 MAX_SECONDS 60
  ARGS bench gpt --bf16 --beside-float32 --tp 2 --layers 1 --hidden 32 --heads 2 --vocab 64
       --seq 16 --steps 3 --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_bench_beside
  EXPECT_EXIT 0
  EXPECT_OUTPUT "bench gpt: beside float32, 3 alternating pairs: bf16 [0-9.]+ ms/step median \\([0-9.]+ fastest\\), float32 [0-9.]+ \\([0-9.]+\\); bf16 / float32 [0-9.]+ \\(median of the pairs; [0-9.]+ to [0-9.]+\\)")
mpitron_add_expect_test(bench_gpt_beside_float32_needs_bf16 TARGET mpitron NP 2 TIMEOUT 60
  ARGS bench gpt --beside-float32 --layers 1 --hidden 32 --heads 2 --seq 16
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_bench_beside
  EXPECT_EXIT 2
  EXPECT_OUTPUT "rank 0: error: --beside-float32 times --bf16's step beside float32's: add --bf16")
