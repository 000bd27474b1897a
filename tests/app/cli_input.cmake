# Input a new user gets wrong, through the real CLI: one line naming the option and its value on
# every rank, exit 2, before any work; and the topology rule for partly given --tp/--pp/--dp.
set(cli_ckpt ${PROJECT_SOURCE_DIR}/tests/data/checkpoint_tiny)
set(cli_text ${PROJECT_SOURCE_DIR}/tests/data/checkpoint_eval.txt)
set(cli_logs --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_cli)

# NAME NP MESSAGE ARGS...: `mpitron ARGS` on NP ranks prints "rank 0: error: MESSAGE" and the
# same on the last rank (MESSAGE literal text), and exits 2.
function(cli_bad_test name np message)
  string(REGEX REPLACE "([][().*+])" "\\\\\\1" regex "${message}")
  math(EXPR last "${np} - 1")
  mpitron_add_expect_test(cli_bad_${name} TARGET mpitron NP ${np} TIMEOUT 60 MAX_SECONDS 30
    ARGS ${ARGN} ${cli_logs}
    EXPECT_EXIT 2 EXPECT_OUTPUT "rank 0: error: ${regex}\n" "rank ${last}: error: ${regex}\n")
endfunction()

# bench gpt's sizes: a sequence that does not split into 2 cp zigzag chunks.
cli_bad_test(bench_gpt_seq_cp 2 "--seq 10 does not split into 2*cp = 4 equal zigzag chunks (--cp 2): --seq 8 would"
             bench gpt --cp 2 --seq 10 --layers 1 --hidden 32 --heads 2)
# 2 ranks: the default topology (2, 1, 1) fits the tiny checkpoint.
cli_bad_test(generate_tokens_range 2 "--tokens must be in [0, 1000000], got 99999999999"
             generate --load ${cli_ckpt} --prompt x --tokens 99999999999)
cli_bad_test(generate_top_k 2 "--top-k must be >= 0, got -1"
             generate --load ${cli_ckpt} --prompt x --top-k -1)
cli_bad_test(generate_temperature 2 "--temperature must be a finite number >= 0, got nan"
             generate --load ${cli_ckpt} --prompt x --temperature nan)
# eval and generate read exactly one of --load and --init-from.
cli_bad_test(eval_no_model 2 "give --load DIR or --init-from FILE_OR_FOLDER"
             eval --data ${cli_text})
cli_bad_test(eval_load_and_init_from 2 "give --load DIR or --init-from FILE_OR_FOLDER, not both"
             eval --load ${cli_ckpt} --init-from ${PROJECT_SOURCE_DIR}/tests/data/hf_llama_tied
             --data ${cli_text})
cli_bad_test(generate_no_model 2 "give --load DIR or --init-from FILE_OR_FOLDER"
             generate --prompt x)
cli_bad_test(generate_load_and_init_from 2 "give --load DIR or --init-from FILE_OR_FOLDER, not both"
             generate --load ${cli_ckpt} --init-from ${PROJECT_SOURCE_DIR}/tests/data/llmc_sample_f32.bin
             --prompt x)
# A model of fewer ids than bytes (llm.c's sample: vocab 70) meets byte 120 ('x').
cli_bad_test(generate_prompt_outside_vocab 2 "--prompt holds byte 120, outside the model's vocab 70"
             generate --init-from ${PROJECT_SOURCE_DIR}/tests/data/llmc_sample_f32.bin --prompt x)
cli_bad_test(eval_data_outside_vocab 2 "--data ${cli_text} holds byte 122, outside the model's vocab 70"
             eval --init-from ${PROJECT_SOURCE_DIR}/tests/data/llmc_sample_f32.bin --data ${cli_text})
cli_bad_test(eval_heads_with_load 2 "--heads goes with --init-from: a checkpoint records its heads"
             eval --load ${cli_ckpt} --heads 4 --data ${cli_text})
cli_bad_test(eval_gelu_with_load 2 "--gelu goes with --init-from: a checkpoint records its GELU"
             eval --load ${cli_ckpt} --gelu erf --data ${cli_text})
cli_bad_test(generate_gelu_with_llama 2 "--gelu is GPT-2's MLP activation, and --init-from ${PROJECT_SOURCE_DIR}/tests/data/hf_llama_tied is a Llama folder (SwiGLU)"
             generate --init-from ${PROJECT_SOURCE_DIR}/tests/data/hf_llama_tied --gelu tanh --prompt x)
cli_bad_test(eval_seq_zero 2 "--seq must be in [1, 16] (the model's block size), got 0"
             eval --load ${cli_ckpt} --data ${cli_text} --seq 0)
cli_bad_test(train_seq_zero 2 "--seq must be >= 1, got 0"
             train --data ${cli_text} --seq 0 --steps 1)
# eval --split val of a file whose last 10 % (the validation side) is shorter than one window.
add_test(NAME cli_eval_split_short_setup
         COMMAND ${CMAKE_COMMAND} -DPATH=${CMAKE_CURRENT_BINARY_DIR}/cli_split/short.txt
                 "-DTEXT=a text of one hundred bytes, ninety for training and ten for validation, the split of train"
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/WriteFile.cmake)
set_tests_properties(cli_eval_split_short_setup PROPERTIES FIXTURES_SETUP cli_split_short)
cli_bad_test(eval_split_val_short 2
             "${CMAKE_CURRENT_BINARY_DIR}/cli_split/short.txt: its val split holds 10 bytes, shorter than one window of seq + 1 = 17"
             eval --load ${cli_ckpt} --data ${CMAKE_CURRENT_BINARY_DIR}/cli_split/short.txt --split val)
set_tests_properties(cli_bad_eval_split_val_short PROPERTIES FIXTURES_REQUIRED cli_split_short)
cli_bad_test(eval_split_value 2 "--split: test not in {all,train,val} (see --help)"
             eval --load ${cli_ckpt} --data ${cli_text} --split test)
cli_bad_test(eval_data_directory 2 "${CMAKE_CURRENT_BINARY_DIR}: no *train*.bin or *val*.bin files"
             eval --load ${cli_ckpt} --data ${CMAKE_CURRENT_BINARY_DIR})
cli_bad_test(train_data_directory 2 "${CMAKE_CURRENT_BINARY_DIR}: no *train*.bin or *val*.bin files"
             train --seq 16 --steps 1 --data ${CMAKE_CURRENT_BINARY_DIR})
# Options of bench's MLP step given before `comm` would be silently ignored by bench comm.
cli_bad_test(bench_step_option_before_comm 2
             "bench comm does not take --recompute (an option of bench's MLP step given before 'comm')"
             bench --recompute comm --max-bytes 4096)
cli_bad_test(bench_dtype_unknown 1 "--dtype 'fp8' is not one of: float32, bfloat16"
             bench --dtype fp8)
cli_bad_test(bench_steps_zero 1 "--steps must be >= 1 and --warmup >= 0, got --steps 0 --warmup 2"
             bench --steps 0)
cli_bad_test(unknown_subcommand 2 "unknown subcommand 'trian' (run mpitron --help)" trian)
# Arguments a subcommand does not take, named as typed (CLI11 lists them last first).
cli_bad_test(bench_comm_topology 2
             "mpitron bench comm does not take --tp 2 (see mpitron bench comm --help)"
             bench comm --tp 2)
cli_bad_test(bench_comm_dtype_unknown 2 "--dtype: float16 not in {float32,bfloat16} (see --help)"
             bench comm --dtype float16)
cli_bad_test(bench_comm_tune_bf16 2 "bench comm --tune-table measures float32 buffers: drop --dtype bfloat16"
             bench comm --tune-table --dtype bfloat16)
cli_bad_test(bench_comm_iterations_zero 2 "--max-iterations: must be an integer in [1, 2147483647], got 0 (see --help)"
             bench comm --max-iterations 0)
cli_bad_test(bench_comm_bytes_negative 2 "--max-bytes: must be an integer in [4, 268435456], got -1 (see --help)"
             bench comm --max-bytes -1)
cli_bad_test(validate_seed_too_large 1
             "--seed: must be an integer in [0, 18446744073709551615], got 99999999999999999999 (see --help)"
             validate --seed 99999999999999999999)
cli_bad_test(train_peak_negative 2 "--peak-gflops: must be a finite number >= 0, got -1 (see --help)"
             train --peak-gflops -1)

# A boolean flag's value is a boolean word: not any integer (CLI11 alone reads 2 as true, -1 as
# false).
cli_bad_test(train_bf16_integer 2 "--bf16: must be true or false (or on/off, yes/no, 1/0), got 2 (see --help)"
             train --bf16=2)
cli_bad_test(eval_bf16_negative 2 "--bf16: must be true or false (or on/off, yes/no, 1/0), got -1 (see --help)"
             eval --bf16=-1 --load ${cli_ckpt} --data ${cli_text})
cli_bad_test(train_dp_no_check_integer 1 "--no-check-replicas: must be true or false (or on/off, yes/no, 1/0), got -1 (see --help)"
             train-dp --no-check-replicas=-1)

# An option given twice keeps its last value (as argparse does); a missing value is named.
mpitron_add_expect_test(cli_option_twice_last_wins TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
  ARGS bench comm --max-bytes 64 --max-bytes 4096 --min-bytes 4096 --max-iterations 5 ${cli_logs}
  EXPECT_EXIT 0 EXPECT_OUTPUT "all-reduce +4 KiB +5 ")
mpitron_add_expect_test(cli_bad_value_missing TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
  ARGS bench comm --max-iterations
  EXPECT_EXIT 2 EXPECT_OUTPUT "rank 0: error: --max-iterations needs a value \\(see --help\\)\n"
                              "rank 1: error: --max-iterations needs a value")

# --dp omitted: dp = world / (tp*pp) (Megatron-LM's rule); --dp given: an omitted --tp/--pp is 1.
mpitron_add_expect_test(cli_validate_tp_only_fills_dp TARGET mpitron NP 4 TIMEOUT 240
  ARGS validate --tp 2 ${cli_logs}
  EXPECT_EXIT 0 EXPECT_OUTPUT "world 4 = tp 2 x pp 1 x dp 2" "all parallel validations passed"
  REJECT_OUTPUT "FAIL")
cli_bad_test(validate_tp_not_dividing 4
             "world size 4 is not divisible by tp*pp = 3 (tp 3, pp 1, --dp omitted)"
             validate --tp 3)
cli_bad_test(validate_tp_not_dividing_vocab 3
             "the GPT checks' vocab 256 is not divisible by tp 3 (give a tp that divides it)"
             validate --tp 3 --hidden 48 --intermediate 96 --seq 18)
cli_bad_test(validate_dp_only 4 "tp*pp*dp = 1*1*2 = 2, but the world size is 4" validate --dp 2)

# --help, which describes the common flags, names the type of --seed once (its check adds no
# second name).
mpitron_add_expect_test(cli_help_seed_type TARGET mpitron NP 1 TIMEOUT 60
  ARGS --help EXPECT_EXIT 0 EXPECT_OUTPUT "--seed UINT=0 " REJECT_OUTPUT "UINT:UINT")

# --json reports of generate and export: the file holds the report's keys (check_json.py).
function(cli_json_test subcommand keys)
  set(report ${CMAKE_CURRENT_BINARY_DIR}/cli_${subcommand}.json)
  add_test(NAME cli_json_${subcommand}
           COMMAND ${CMAKE_COMMAND} -E env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
                   $<TARGET_FILE:mpitron> ${subcommand} --load ${cli_ckpt} ${ARGN}
                   --json ${report} ${cli_logs})
  add_test(NAME cli_json_${subcommand}_keys
           COMMAND Python3::Interpreter ${CMAKE_CURRENT_SOURCE_DIR}/check_json.py ${report} ${keys})
  set_tests_properties(cli_json_${subcommand} PROPERTIES FIXTURES_SETUP cli_json_${subcommand})
  set_tests_properties(cli_json_${subcommand}_keys PROPERTIES
                       FIXTURES_REQUIRED cli_json_${subcommand})
endfunction()
cli_json_test(generate "bytes;prompt_bytes;step;seed" --prompt GNU --tokens 4)
cli_json_test(export "out;load;step;config"
              --out ${CMAKE_CURRENT_BINARY_DIR}/cli_export.safetensors)

# --load of a step folder loads that step (an older one than the folder's newest, when there are
# several); the committed checkpoint's only step evaluates to the folder's number.
mpitron_add_expect_test(cli_eval_load_step_folder TARGET mpitron NP 1 TIMEOUT 60
  ARGS eval --load ${cli_ckpt}/step_1000 --data ${cli_text} ${cli_logs}
  EXPECT_EXIT 0 EXPECT_OUTPUT "eval: [^\n]*step_1000 step 1000 on [^\n]*loss 4\\.0431")

# bench --dtype bfloat16 states its GEMM operands in the first line.
mpitron_add_expect_test(bench_dtype_bfloat16_stated TARGET mpitron NP 1 TIMEOUT 60
  ARGS bench --dtype bfloat16 --hidden 32 --intermediate 64 --seq 8 --batch 2 --steps 1
       --warmup 0 ${cli_logs}
  EXPECT_EXIT 0 EXPECT_OUTPUT "micro-batches 1, bfloat16 GEMM operands\n")

# bench gemm: the FMA peak, then a line per product with a number per provider the build has.
mpitron_add_expect_test(bench_gemm_prints_every_product TARGET mpitron NP 1 TIMEOUT 120
  ARGS bench gemm --seconds 0.01 ${cli_logs}
  EXPECT_EXIT 0
  EXPECT_OUTPUT "bench gemm: float32[^\n]*FMA peak [0-9.]+ GFLOP/s[^\n]*auto = (blas|eigen|mpitron) \\((measured|cached) at 1 thread: eigen [0-9.]+, [^\n]*mpitron [0-9.]+ GFLOP/s\\)\n"
                "GPT-2 124M +lm head +dW +50304 x 768 x 512 +[0-9.]+ "
                "SmolLM-135M +lm head +forward +384 x 49152 x 576 +[0-9.]+ "
                "SmolLM-135M +lm head +dx +384 x 576 x 49152 +[0-9.]+ "
                "SmolLM-135M +lm head +dW +49152 x 576 x 384 +[0-9.]+ ")
# Auto's choice follows the rates it is given (MPITRON_GEMM_RATES, as a test's stand-in for the
# clock), also where MPITRON_GEMM pins the runs' provider, and a malformed variable is one error
# line.
mpitron_add_expect_test(bench_gemm_auto_follows_given_rates TARGET mpitron NP 1 TIMEOUT 120
  ARGS bench gemm --seconds 0.01 ${cli_logs}
  EXPECT_EXIT 0
  EXPECT_OUTPUT "auto = eigen \\(given at 1 thread: eigen 90.0, mpitron 80.0 GFLOP/s\\)\n")
set_tests_properties(bench_gemm_auto_follows_given_rates PROPERTIES
                     ENVIRONMENT "MPITRON_GEMM_RATES=eigen=90,mpitron=80;MPITRON_GEMM=mpitron")
mpitron_add_expect_test(bench_gemm_bad_given_rates TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
  ARGS bench gemm --seconds 0.01 ${cli_logs}
  EXPECT_EXIT 2
  EXPECT_OUTPUT "rank 0: error: --gemm auto: MPITRON_GEMM_RATES: GEMM rates 'eigen=x'"
                "rank 1: error: --gemm auto: rank 0 could not choose")
set_tests_properties(bench_gemm_bad_given_rates PROPERTIES ENVIRONMENT "MPITRON_GEMM_RATES=eigen=x")
# --dtype bfloat16: the bfloat16 GEMM's path named (the VDPBF16PS path with that instruction's
# peak), mpitron's float32 GEMM and the bfloat16 one into float32 and bfloat16 C on every product.
mpitron_add_expect_test(bench_gemm_bfloat16_names_its_path TARGET mpitron NP 1 TIMEOUT 120
  ARGS bench gemm --dtype bfloat16 --seconds 0.01 ${cli_logs}
  EXPECT_EXIT 0
  EXPECT_OUTPUT "bench gemm: bfloat16 .path: (avx512bf16. beside mpitron's float32[^\n]*FMA peak[^\n]*VDPBF16PS peak [0-9.]+ GFLOP/s|convert-at-pack fp32. beside mpitron's float32[^\n]*FMA peak)"
                "mpitron +bf16>f32 +bf16>bf16 +% peak\n"
                "GPT-2 124M +lm head +dW +50304 x 768 x 512 +[0-9.]+ +[0-9.]+ +[0-9.]+ ")
# MPITRON_BF16_GEMM=convert-at-pack runs, on any CPU, the path of a CPU without AVX512-BF16; any
# other value than auto, avx512bf16 and convert-at-pack is one error line per rank.
mpitron_add_expect_test(bench_gemm_bfloat16_forced_convert_at_pack TARGET mpitron NP 1 TIMEOUT 120
  ARGS bench gemm --dtype bfloat16 --seconds 0.01 ${cli_logs}
  EXPECT_EXIT 0
  EXPECT_OUTPUT "bench gemm: bfloat16 .path: convert-at-pack fp32. beside mpitron's float32")
set_tests_properties(bench_gemm_bfloat16_forced_convert_at_pack PROPERTIES
                     ENVIRONMENT "MPITRON_BF16_GEMM=convert-at-pack")
cli_bad_test(bf16_gemm_variable 2
             "MPITRON_BF16_GEMM 'fast' is not one of: auto, avx512bf16, convert-at-pack" validate)
set_tests_properties(cli_bad_bf16_gemm_variable PROPERTIES ENVIRONMENT "MPITRON_BF16_GEMM=fast")
mpitron_add_expect_test(bench_gemm_bad_seconds TARGET mpitron NP 1 TIMEOUT 60
  ARGS bench gemm --seconds 100 ${cli_logs}
  EXPECT_EXIT 2 EXPECT_OUTPUT "rank 0: error: --seconds must be in .0, 60., got 100")
# It times the CPU GEMM: --device auto (the default) means cpu even where a GPU is visible, and
# cuda is refused whether or not there is one.
mpitron_add_expect_test(bench_gemm_rejects_cuda TARGET mpitron NP 1 TIMEOUT 60
  ARGS bench gemm --device cuda ${cli_logs}
  EXPECT_EXIT 2
  EXPECT_OUTPUT "rank 0: error: bench gemm times the CPU GEMM: --device must be cpu or auto")

# Every help screen fits on one screen and ends with one example; a line too wide, too many
# lines or a missing example fail.
foreach(command "" validate train eval generate export bench "bench comm" "bench gemm"
                "bench gpt" "bench schedule" train-dp attention tokenize)
  string(REPLACE " " "_" name "help_screen_mpitron_${command}")
  add_test(NAME ${name} COMMAND ${CMAKE_COMMAND} -DMPITRON=$<TARGET_FILE:mpitron>
                                "-DCOMMAND=${command}" -P ${CMAKE_CURRENT_SOURCE_DIR}/HelpScreen.cmake)
endforeach()
# The check itself fails on a help text without an example (coreutils' cat).
add_test(NAME help_screen_catches_a_missing_example
         COMMAND ${CMAKE_COMMAND} -DEXPECT_EXIT=nonzero "-DEXPECT_OUTPUT=does not end with one example"
                 -P ${PROJECT_SOURCE_DIR}/cmake/ExpectRun.cmake -- ${CMAKE_COMMAND}
                 -DMPITRON=cat -DCOMMAND= -P ${CMAKE_CURRENT_SOURCE_DIR}/HelpScreen.cmake)
cli_bad_test(threads_zero 1 "--threads: must be an integer in [1, 4096], got 0 (see --help)"
             validate --threads 0)
# A bad MPITRON_CPU_THREADS is the same kind of error (one line per rank, exit 2), and only where
# it is used: --threads overrides it.
cli_bad_test(threads_variable 2 "MPITRON_CPU_THREADS must be an integer in [1, 4096], not 'abc'"
             validate)
set_tests_properties(cli_bad_threads_variable PROPERTIES ENVIRONMENT "MPITRON_CPU_THREADS=abc")
mpitron_add_expect_test(cli_threads_flag_overrides_variable TARGET mpitron NP 1 TIMEOUT 60
  ARGS validate --threads 1 ${cli_logs}
  EXPECT_EXIT 0 EXPECT_OUTPUT "all parallel validations passed")
set_tests_properties(cli_threads_flag_overrides_variable PROPERTIES
                     ENVIRONMENT "MPITRON_CPU_THREADS=abc")

# Size flags near 2^31, 2^62 and 2^63 - 1, every INT flag of every subcommand (size_sweep.py
# reads them from --help): one line naming the flag, exit 2, never a crash or a wrapped number.
add_test(NAME cli_size_flags_sweep
         COMMAND Python3::Interpreter ${CMAKE_CURRENT_SOURCE_DIR}/size_sweep.py
                 --mpitron $<TARGET_FILE:mpitron> --checkpoint ${cli_ckpt} --text ${cli_text}
                 --tokenizer ${cli_text} --work ${CMAKE_CURRENT_BINARY_DIR}/size_sweep)
set_tests_properties(cli_size_flags_sweep PROPERTIES TIMEOUT 300 PROCESSORS 2)
# The products of the report: micro-batch x dp wrapped to 0 (SIGFPE) or to -2.
cli_bad_test(micro_batch_times_dp_wraps 4 "--micro-batch: must be at most 2147483647, got 4611686018427387904 (see --help)"
  train --dp 4 --global-batch 4 --micro-batch 4611686018427387904)
cli_bad_test(micro_batch_max_int64 2 "--micro-batch: must be at most 2147483647, got 9223372036854775807 (see --help)"
  train --dp 2 --micro-batch 9223372036854775807)
