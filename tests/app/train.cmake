# Real `mpitron train` runs: a tiny 3-D parallel run with metrics, and bad input.
set(train_small --layers 2 --hidden 32 --heads 4 --seq 16 --global-batch 8 --micro-batch 2
    --steps 3 --warmup-steps 1 --eval-interval 2 --eval-iters 4)

# The metrics file starts fresh, then train_metrics_format reads what the run wrote.
find_package(Python3 REQUIRED COMPONENTS Interpreter)
add_test(NAME train_metrics_clean
         COMMAND ${CMAKE_COMMAND} -E rm -f ${CMAKE_CURRENT_BINARY_DIR}/train_metrics.jsonl)
mpitron_add_expect_test(train_tp2_pp2_dp2 TARGET mpitron NP 8 TIMEOUT 300
  ARGS train --tp 2 --pp 2 --dp 2 ${train_small} --peak-gflops 100
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train
       --metrics ${CMAKE_CURRENT_BINARY_DIR}/train_metrics.jsonl
  EXPECT_EXIT 0
  EXPECT_OUTPUT "train: tp=2 pp=2 dp=2 \\(8 ranks" "2 micro-batches of 2 sequences"
                "step 3/3 loss [0-9.]+ lr [^\n]* tokens/s [0-9.]+ GFLOP/s MFU [0-9.]+%" "step 2 val_loss" "step 3 val_loss" "train done"
                "step phases \\(rank 0, mean\\): forward-backward [0-9.]+ ms \\([0-9]+ %\\), gradient reduction [0-9.]+ ms \\([0-9]+ %\\), gradient norm [0-9.]+ ms \\([0-9]+ %\\), optimizer [0-9.]+ ms \\([0-9]+ %\\)\n")
add_test(NAME train_metrics_format
         COMMAND Python3::Interpreter ${CMAKE_CURRENT_SOURCE_DIR}/check_metrics.py
                 ${CMAKE_CURRENT_BINARY_DIR}/train_metrics.jsonl --topology 2 2 2 --steps 3
                 --eval-steps 2 3 --mfu)
set_tests_properties(train_metrics_clean PROPERTIES FIXTURES_SETUP train_metrics_clean)
set_tests_properties(train_tp2_pp2_dp2 PROPERTIES FIXTURES_REQUIRED train_metrics_clean
                                                  FIXTURES_SETUP train_metrics)
set_tests_properties(train_metrics_format PROPERTIES FIXTURES_REQUIRED train_metrics)

# Bad input: one line on every rank, exit 2, before any training.
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/short.txt "twelve bytes")
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/empty.txt "")
string(REPEAT "0123456789" 10 hundred_bytes)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/hundred.txt "${hundred_bytes}")
set(train_bad_runs
  "batch|--global-batch 6 --micro-batch 2 --dp 2|--global-batch 6 is not divisible by --micro-batch 2 x dp 2"
  "heads|--heads 3 --hidden 48 --tp 2 --dp 1|heads 3 is not divisible by tp 2"
  "layers|--layers 3 --pp 2 --dp 1|layers 3 is not divisible by pp 2"
  "vocab|--vocab 255|--vocab 255 cannot hold the 256 byte values"
  "model|--model gpt5|--model 'gpt5' is not one of: gpt2, gpt2-medium, gpt2-large, gpt2-xl"
  "gelu|--gelu relu|--gelu 'relu' is not one of: erf, tanh"
  "decay|--lr-decay-style step|--lr-decay-style 'step' is not one of: cosine, linear, constant"
  "beta|--adam-beta2 1|--adam-beta2 must be in "
  "eps|--adam-eps 0|--adam-eps must be a finite positive number, got 0"
  "blocksize|--block-size 8|--seq 16 is longer than --block-size 8"
  "sequenceparallel|--seq 15 --tp 2 --dp 1 --sequence-parallel|--sequence-parallel needs --seq 15 divisible by tp 2"
  "lr|--lr nan|--lr must be a finite positive number, got nan"
  "clip|--grad-clip -1|--grad-clip must be a finite positive number, got -1"
  "stop|--stop-after -1|--stop-after must be >= 0, got -1"
  "schedule|--schedule gpipe|--schedule 'gpipe' is not one of: 1f1b, afab"
  "arch|--arch falcon|--arch 'falcon' is not one of: gpt2, llama"
  "llamaflag|--kv-heads 2|--kv-heads is a llama flag: add --arch llama"
  "llamagelu|--arch llama --gelu tanh|--gelu is a gpt2 flag: the llama MLP is SwiGLU"
  "modelgelu|--model smollm-135m --gelu tanh|--gelu is a gpt2 flag: the llama MLP is SwiGLU"
  "modelarch|--model smollm-135m --arch gpt2|--model smollm-135m is a llama model, not --arch gpt2"
  "modelllamaflag|--model gpt2 --kv-heads 2|--kv-heads is a llama flag: --model gpt2 is a gpt2 model"
  "llamaflagdefault|--rope-theta 10000|--rope-theta is a llama flag: add --arch llama"
  "modelkvheads|--model smollm-135m --layers 1 --hidden 32 --heads 4|heads 4 is not divisible by kv heads 3 (kv heads 3 comes from --model smollm-135m)"
  "llamainit|--arch llama --init-from x.bin|--init-from x.bin: --arch llama reads a Hugging Face Llama folder"
  "modelinit|--model smollm-135m --init-from x.bin|--init-from x.bin: --model smollm-135m (a llama model) reads a Hugging Face Llama folder"
  "kvheads|--arch llama --heads 4 --hidden 64 --kv-heads 3|heads 4 is not divisible by kv heads 3"
  "kvtp|--arch llama --heads 4 --hidden 64 --kv-heads 1 --tp 2 --dp 1|kv heads 1 is not divisible by tp 2 (each TP rank holds whole key/value heads)"
  "ffntp|--arch llama --heads 4 --hidden 64 --ffn-hidden 101 --tp 2 --dp 1|ffn hidden 101 is not divisible by tp 2"
  "dtypebf16|--dtype bfloat16|--dtype bfloat16 is not a parameter dtype: --bf16 trains in bfloat16 with float32 master weights (--dtype float32)"
  "bf16float64|--bf16 --dtype float64|--bf16 needs --dtype float32 (its master weights), got --dtype float64"
  "gradreducefp32|--grad-reduce-in-bf16|--grad-reduce-in-bf16 needs --bf16 (a float32 run reduces its gradients in float32)"
  "virtualstages|--virtual-stages 0|--virtual-stages must be >= 1, got 0"
  "virtualmany|--layers 4 --virtual-stages 8|--virtual-stages 8 is more than the 4 layers"
  "virtuallayers|--layers 4 --pp 2 --dp 1 --virtual-stages 4|layers 4 is not divisible by pp 2 x 4 virtual stages"
  "virtualmicro|--layers 4 --pp 2 --dp 1 --global-batch 6 --micro-batch 2 --virtual-stages 2|--virtual-stages 2 needs micro-batches per step (--global-batch / (--micro-batch x dp) = 3) a multiple of --pp 2"
  "virtualpp|--dp 2 --virtual-stages 2|--virtual-stages 2 needs --pp 2 or more, got --pp 1"
  "missing|--data ${CMAKE_CURRENT_BINARY_DIR}/missing.txt|missing.txt: cannot read: No such file"
  "empty|--data ${CMAKE_CURRENT_BINARY_DIR}/empty.txt|empty.txt: empty file"
  "short|--data ${CMAKE_CURRENT_BINARY_DIR}/short.txt|training data of 10 tokens is shorter than one window"
  "validation|--data ${CMAKE_CURRENT_BINARY_DIR}/hundred.txt|the validation part of the data (10 bytes) is shorter than one window of --seq + 1 = 17 bytes"
  "minlr|--min-lr 0.1|--min-lr 0.1 is above --lr 0.001"
  "initfrommissing|--init-from ${CMAKE_CURRENT_BINARY_DIR}/no-such-model|no-such-model: no such file or folder"
  "lrfloat32|--lr 1e39|--lr 1e+39 is not finite in float32 (at most 3.40282e+38)"
  "normepsfloat32|--arch llama --heads 4 --hidden 64 --norm-eps 1e39|--norm-eps 1e+39 is not finite in float32 (at most 3.40282e+38)"
  "ropethetafloat32|--arch llama --heads 4 --hidden 64 --rope-theta 1e39|--rope-theta 1e+39 is not finite in float32 (at most 3.40282e+38)"
  "exitsignal|--exit-signal SIGUSR2,SIGFOO|--exit-signal 'SIGFOO' is not one of: SIGHUP, SIGINT"
  "stopafter|--stop-after 2|--stop-after 2 is beyond --steps 1"
  "save|--save /proc/mpitron-no-such-folder|--save /proc/mpitron-no-such-folder: cannot create the folder"
  "metrics|--metrics /nonexistent-mpitron-dir/m.jsonl|--metrics /nonexistent-mpitron-dir/m.jsonl: cannot open for appending"
  "memory|--layers 1000000 --hidden 64 --heads 4|this run needs about"
  "memoryhint|--layers 1000000 --hidden 64 --heads 4|--seq or --micro-batch, --recompute, or more ranks")
foreach(run IN LISTS train_bad_runs)
  string(REPLACE "|" ";" fields "${run}")
  list(GET fields 0 name)
  list(GET fields 1 flags)
  list(GET fields 2 message)
  separate_arguments(flags)
  string(REGEX REPLACE "([().*+])" "\\\\\\1" message_regex "${message}")
  mpitron_add_expect_test(train_bad_${name} TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
    ARGS train --seq 16 --steps 1 ${flags} --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_bad
    EXPECT_EXIT 2 EXPECT_OUTPUT "rank 0: error: [^\n]*${message_regex}" "rank 1: error:")
endforeach()

# --arch llama states its choices in the start-up line; export refuses its checkpoint (no
# Hugging Face Llama writer yet) with one line.
set(train_llama_dir ${CMAKE_CURRENT_BINARY_DIR}/train_llama_ckpt)
mpitron_add_expect_test(train_llama_stated TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
  ARGS train ${train_small} --arch llama --kv-heads 2 --ffn-hidden 48 --tp 2 --dp 1
       --save ${train_llama_dir} --overwrite-checkpoints
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_llama
  EXPECT_EXIT 0 EXPECT_OUTPUT "llama \\(2 kv heads, ffn 48, RoPE theta 10000, tied head\\)")
mpitron_add_expect_test(export_llama_refused TARGET mpitron NP 1 TIMEOUT 60 MAX_SECONDS 30
  ARGS export --load ${train_llama_dir} --out ${CMAKE_CURRENT_BINARY_DIR}/llama.safetensors
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_llama
  EXPECT_EXIT 2 EXPECT_OUTPUT
  "holds a llama model, which exports as a Hugging Face Llama folder only .--format hf., not --format safetensors")
set_tests_properties(export_llama_refused PROPERTIES DEPENDS train_llama_stated)
# Resuming it untied names both choices in words.
mpitron_add_expect_test(train_llama_resume_untied TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
  ARGS train ${train_small} --arch llama --kv-heads 2 --ffn-hidden 48 --tp 2 --dp 1
       --untie-embeddings --load ${train_llama_dir}
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_llama
  EXPECT_EXIT 2 EXPECT_OUTPUT
  "rank 0: error: --load [^\n]*train_llama_ckpt: the checkpoint has tied embeddings, this run untied \\(--untie-embeddings\\)\n"
  "rank 1: error: ")
set_tests_properties(train_llama_resume_untied PROPERTIES DEPENDS train_llama_stated)

# --model llama-3.2-1b brings Llama 3's rope_scaling, which the start-up line states, also when
# size flags shrink the model.
mpitron_add_expect_test(train_llama32_scaling_stated TARGET mpitron NP 1 TIMEOUT 60 MAX_SECONDS 30
  ARGS train --model llama-3.2-1b ${train_small} --kv-heads 2 --ffn-hidden 48 --vocab 256
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_llama32
  EXPECT_EXIT 0 EXPECT_OUTPUT
  "RoPE theta 500000 with llama3 scaling .factor 32, low 1, high 4, original 8192., tied head")

# The start-up line names the provider that runs the dtype's products: mpitron's own GEMM is
# float32 only, so --gemm mpitron's float64 products run on Eigen.
mpitron_add_expect_test(train_float64_gemm_stated TARGET mpitron NP 1 TIMEOUT 60 MAX_SECONDS 30
  ARGS train ${train_small} --dtype float64 --gemm mpitron
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_float64_gemm
  EXPECT_EXIT 0 EXPECT_OUTPUT "device cpu \\(eigen GEMM, [0-9]+ thread[^\n]*\\), float64")

# --bf16 is stated in the start-up line.
mpitron_add_expect_test(train_bf16_stated TARGET mpitron NP 1 TIMEOUT 60 MAX_SECONDS 30
  ARGS train ${train_small} --bf16 --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_bf16
  EXPECT_EXIT 0 EXPECT_OUTPUT "bfloat16 GEMMs \\((avx512bf16|convert-at-pack fp32)\\), float32 master")
# The CPU path is named, as MPITRON_BF16_GEMM chose it (the paths differ in bits).
mpitron_add_expect_test(train_bf16_gemm_path_stated TARGET mpitron NP 1 TIMEOUT 60 MAX_SECONDS 30
  ARGS train ${train_small} --bf16 --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_bf16_path
  EXPECT_EXIT 0 EXPECT_OUTPUT "bfloat16 GEMMs \\(convert-at-pack fp32\\), float32 master")
set_tests_properties(train_bf16_gemm_path_stated PROPERTIES
                     ENVIRONMENT "MPITRON_BF16_GEMM=convert-at-pack")
# --grad-reduce-in-bf16 too, at dp 2.
mpitron_add_expect_test(train_grad_reduce_in_bf16_stated TARGET mpitron NP 2 TIMEOUT 60
  MAX_SECONDS 30
  ARGS train ${train_small} --dp 2 --bf16 --grad-reduce-in-bf16
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_grad_reduce_bf16
  EXPECT_EXIT 0 EXPECT_OUTPUT "bfloat16 GEMMs \\([a-z0-9 -]+\\) and DP gradient reduction, float32 master"
                              "step 3/3 loss"
                              "communication per step \\(rank 0, payload it hands to each group, mean\\): dp [0-9.]+ MiB")
# At dp 1 there is no reduction for it to act on, and the line says so.
mpitron_add_expect_test(train_grad_reduce_in_bf16_dp1_stated TARGET mpitron NP 1 TIMEOUT 60
  MAX_SECONDS 30
  ARGS train ${train_small} --bf16 --grad-reduce-in-bf16
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_grad_reduce_bf16_dp1
  EXPECT_EXIT 0 EXPECT_OUTPUT "bfloat16 GEMMs \\([a-z0-9 -]+\\), float32 master; --grad-reduce-in-bf16 has no DP gradient reduction to act on at dp 1")

# --recompute is stated in the start-up line, as bench states it.
mpitron_add_expect_test(train_recompute_stated TARGET mpitron NP 1 TIMEOUT 60 MAX_SECONDS 30
  ARGS train ${train_small} --recompute --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_recompute
  EXPECT_EXIT 0 EXPECT_OUTPUT "\\(1f1b schedule, recomputing activations\\)" "step 3/3 loss")
# So is --sequence-parallel, on a TP pair of a 3-D run.
mpitron_add_expect_test(train_sequence_parallel_stated TARGET mpitron NP 8 TIMEOUT 300
  ARGS train --tp 2 --pp 2 --dp 2 ${train_small} --sequence-parallel
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_sequence_parallel
  EXPECT_EXIT 0 EXPECT_OUTPUT "\\(1f1b schedule, sequence parallel\\)" "step 3/3 loss")

# Interleaved 1F1B is stated in the start-up line; each stage's idle share closes the run.
mpitron_add_expect_test(train_virtual_stages_stated TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
  ARGS train ${train_small} --layers 4 --pp 2 --virtual-stages 2
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_virtual_stages
  EXPECT_EXIT 0 EXPECT_OUTPUT "\\(1f1b schedule, 2 virtual stages\\)" "step 3/3 loss"
  "idle share per pipeline stage \\(waiting on communication in the steps\\): [0-9]+ %, [0-9]+ %")

# The progress line: under ctest stdout is a pipe, so `auto` adds nothing to the per-step lines;
# `in-place` redraws one line with carriage returns, with the rate and ETA.
mpitron_add_expect_test(train_progress_auto_off_in_pipe TARGET mpitron NP 1 TIMEOUT 60 MAX_SECONDS 30
  ARGS train ${train_small} --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_progress
  EXPECT_EXIT 0 EXPECT_OUTPUT "step 3/3 loss" REJECT_OUTPUT "train  step")
mpitron_add_expect_test(train_progress_in_place TARGET mpitron NP 1 TIMEOUT 60 MAX_SECONDS 30
  ARGS train ${train_small} --progress in-place
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_progress
  EXPECT_EXIT 0
  EXPECT_OUTPUT "\r" "train  step 3/3 \\(100%\\)  loss [0-9.]+  [0-9.e+]+ tokens/s  elapsed 0:[0-9][0-9]  ETA")

# Resuming with settings other than the checkpoint's: one warning per setting on rank 0, and one
# for the CPU GEMM when --gemm auto picks another one (given rates make auto pick eigen for the
# save and mpitron for the resume, whatever this machine measures).
mpitron_add_expect_test(train_resume_save TARGET mpitron NP 1 TIMEOUT 60
  ARGS train ${train_small} --save ${CMAKE_CURRENT_BINARY_DIR}/ckpt_warn --overwrite-checkpoints
       --stop-after 2
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_warn
  EXPECT_EXIT 0 EXPECT_OUTPUT "saved checkpoint")
mpitron_add_expect_test(train_resume_warns_on_other_settings TARGET mpitron NP 1 TIMEOUT 60
  ARGS train ${train_small} --load ${CMAKE_CURRENT_BINARY_DIR}/ckpt_warn --optimizer sgd
       --lr 0.002 --threads 2 --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_warn
  EXPECT_EXIT 0
  EXPECT_OUTPUT "warning: --optimizer is \"sgd\" in this run but was \"adamw\""
                "warning: --lr is 0.002 in this run but was 0.001" "train done: steps 3..3"
                "warning: the CPU GEMM is \"mpitron\" in this run but was \"(blas|eigen)\" in the run"
                "--gemm auto picks by measurement at the run's --threads. pin --gemm to keep it"
  REJECT_OUTPUT "warning: --(data|dtype|global-batch|steps)")
set_tests_properties(train_resume_save PROPERTIES ENVIRONMENT "MPITRON_GEMM_RATES=eigen=100,mpitron=50")
set_tests_properties(train_resume_warns_on_other_settings PROPERTIES
                     ENVIRONMENT "MPITRON_GEMM_RATES=eigen=50,mpitron=100")
# A provider pinned by --gemm warns too, without the hint to pin it.
mpitron_add_expect_test(train_resume_pinned_gemm_warns TARGET mpitron NP 1 TIMEOUT 60
  ARGS train ${train_small} --load ${CMAKE_CURRENT_BINARY_DIR}/ckpt_warn --gemm mpitron
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_warn
  EXPECT_EXIT 0
  EXPECT_OUTPUT "warning: the CPU GEMM is \"mpitron\" in this run but was \"(blas|eigen)\" in the run"
  REJECT_OUTPUT "pin --gemm")
# In float64 mpitron's GEMM hands its products to Eigen: a resume on Eigen keeps the bits and
# does not warn.
mpitron_add_expect_test(train_resume_float64_save TARGET mpitron NP 1 TIMEOUT 60
  ARGS train ${train_small} --dtype float64 --gemm mpitron --stop-after 2
       --save ${CMAKE_CURRENT_BINARY_DIR}/ckpt_float64_gemm --overwrite-checkpoints
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_warn
  EXPECT_EXIT 0 EXPECT_OUTPUT "saved checkpoint")
mpitron_add_expect_test(train_resume_float64_on_eigen TARGET mpitron NP 1 TIMEOUT 60
  ARGS train ${train_small} --dtype float64 --gemm eigen
       --load ${CMAKE_CURRENT_BINARY_DIR}/ckpt_float64_gemm
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_warn
  EXPECT_EXIT 0 EXPECT_OUTPUT "train done: steps 3..3" REJECT_OUTPUT "CPU GEMM")
# Under --bf16 the products run on the bfloat16 GEMM's path, which --gemm does not reach: a resume
# with another --gemm keeps the bits and does not warn; one on another path (MPITRON_BF16_GEMM)
# warns, which a CPU without AVX512-BF16 cannot show (its only path is convert-at-pack).
mpitron_add_expect_test(train_resume_bf16_save TARGET mpitron NP 1 TIMEOUT 60
  ARGS train ${train_small} --bf16 --gemm eigen --stop-after 2
       --save ${CMAKE_CURRENT_BINARY_DIR}/ckpt_bf16_gemm --overwrite-checkpoints
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_warn
  EXPECT_EXIT 0 EXPECT_OUTPUT "saved checkpoint")
set_tests_properties(train_resume_bf16_save PROPERTIES FIXTURES_SETUP train_resume_bf16
                     ENVIRONMENT "MPITRON_BF16_GEMM=convert-at-pack")
mpitron_add_expect_test(train_resume_bf16_other_gemm TARGET mpitron NP 1 TIMEOUT 60
  ARGS train ${train_small} --bf16 --gemm mpitron --load ${CMAKE_CURRENT_BINARY_DIR}/ckpt_bf16_gemm
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_warn
  EXPECT_EXIT 0 EXPECT_OUTPUT "train done: steps 3..3" REJECT_OUTPUT "CPU GEMM")
set_tests_properties(train_resume_bf16_other_gemm PROPERTIES FIXTURES_REQUIRED train_resume_bf16
                     ENVIRONMENT "MPITRON_BF16_GEMM=convert-at-pack")
mpitron_add_expect_test(train_resume_bf16_other_path TARGET mpitron NP 1 TIMEOUT 60
  ARGS train ${train_small} --bf16 --load ${CMAKE_CURRENT_BINARY_DIR}/ckpt_bf16_gemm
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_warn
  EXPECT_EXIT 0
  EXPECT_OUTPUT "(warning: the CPU GEMM is \"avx512bf16\" in this run but was \"convert-at-pack fp32\"[^\n]*MPITRON_BF16_GEMM chooses|bfloat16 GEMMs \\(convert-at-pack fp32\\))")
set_tests_properties(train_resume_bf16_other_path PROPERTIES FIXTURES_REQUIRED train_resume_bf16)
set_tests_properties(train_resume_float64_save PROPERTIES FIXTURES_SETUP train_resume_float64)
set_tests_properties(train_resume_float64_on_eigen PROPERTIES
                     FIXTURES_REQUIRED train_resume_float64)
set_tests_properties(train_resume_save PROPERTIES FIXTURES_SETUP train_resume_ckpt)
set_tests_properties(train_resume_warns_on_other_settings train_resume_pinned_gemm_warns
                     PROPERTIES FIXTURES_REQUIRED train_resume_ckpt)

# Only finite steps are saved: a rate finite in float32 that makes step 1's update overflow
# (AdamW moves every weight by about lr) stops the run like a non-finite loss, on every rank, and
# leaves no step folder behind; the same run with a sane rate saves step 1.
set(train_nonfinite_dir ${CMAKE_CURRENT_BINARY_DIR}/train_nonfinite)
file(REMOVE_RECURSE ${train_nonfinite_dir})
# A temporary file an interrupted save left: the run takes the folder and removes it at start
# (it saves nothing that would sweep it later).
add_test(NAME train_non_finite_leftover_setup
         COMMAND ${CMAKE_COMMAND} -DPATH=${train_nonfinite_dir}/.latest.tmp.77.0 -DTEXT=partial
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/WriteFile.cmake)
set_tests_properties(train_non_finite_leftover_setup PROPERTIES FIXTURES_SETUP
                     train_nonfinite_leftover)
mpitron_add_expect_test(train_non_finite_step_not_saved TARGET mpitron NP 2 TIMEOUT 60
  ARGS train --tp 2 --layers 2 --hidden 32 --heads 4 --seq 16 --global-batch 8 --micro-batch 2
       --steps 2 --warmup-steps 0 --eval-interval 0 --lr 3.4e38 --save-interval 1
       --save ${train_nonfinite_dir} --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_bad
  EXPECT_EXIT 1
  EXPECT_OUTPUT "rank 0. error: step 1 is not saved: [0-9]+ of its 216 tensors \\(parameters and optimizer moments\\) hold NaN or infinite values"
                "rank 1. error: step 1 is not saved")
add_test(NAME train_non_finite_step_left_no_folder
         COMMAND ${CMAKE_COMMAND} -DDIR=${train_nonfinite_dir} -P
                 ${CMAKE_CURRENT_SOURCE_DIR}/ExpectNoStep.cmake)
set_tests_properties(train_non_finite_step_not_saved PROPERTIES FIXTURES_SETUP train_nonfinite
                     FIXTURES_REQUIRED train_nonfinite_leftover)
set_tests_properties(train_non_finite_step_left_no_folder PROPERTIES
                     FIXTURES_REQUIRED train_nonfinite)

# A metrics file through a resume: an interrupted run (stopped after step 5, last save at 4)
# leaves step 5's records; the run resumed from step 4 drops them, marks the resume, and the
# file holds every step once.
set(train_resume_dir ${CMAKE_CURRENT_BINARY_DIR}/train_resume)
set(train_resume_metrics ${CMAKE_CURRENT_BINARY_DIR}/train_resume.jsonl)
set(train_resume_flags --layers 2 --hidden 32 --heads 4 --seq 16 --global-batch 8 --micro-batch 2
    --steps 6 --eval-interval 2 --eval-iters 2 --save ${train_resume_dir} --metrics
    ${train_resume_metrics} --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train)
add_test(NAME train_resume_metrics_clean
         COMMAND ${CMAKE_COMMAND} -E rm -rf ${train_resume_dir} ${train_resume_metrics})
mpitron_add_expect_test(train_resume_metrics_interrupted TARGET mpitron NP 2 TIMEOUT 60
  ARGS train ${train_resume_flags} --save-interval 2 --stop-after 5
  EXPECT_EXIT 0 EXPECT_OUTPUT "saved checkpoint [^\n]*step_4" "train stopped: steps 1..5")
mpitron_add_expect_test(train_resume_metrics_resumed TARGET mpitron NP 2 TIMEOUT 60
  ARGS train ${train_resume_flags} --load ${train_resume_dir}/step_4
  EXPECT_EXIT 0 EXPECT_OUTPUT "resuming from [^\n]*step 4" "train done")
add_test(NAME train_resume_metrics_format
         COMMAND Python3::Interpreter ${CMAKE_CURRENT_SOURCE_DIR}/check_metrics.py
                 ${train_resume_metrics} --topology 2 1 1 --steps 6 --eval-steps 2 4 6
                 --resumed-from 4)
set_tests_properties(train_resume_metrics_clean PROPERTIES FIXTURES_SETUP train_resume_clean)
set_tests_properties(train_resume_metrics_interrupted PROPERTIES
                     FIXTURES_REQUIRED train_resume_clean FIXTURES_SETUP train_resume_stopped)
set_tests_properties(train_resume_metrics_resumed PROPERTIES
                     FIXTURES_REQUIRED train_resume_stopped FIXTURES_SETUP train_resume_done)
set_tests_properties(train_resume_metrics_format PROPERTIES FIXTURES_REQUIRED train_resume_done)

# One owner per --save folder: a lock of a live process of this host (pid 1 is always alive)
# stops the run at start with one line naming the owner; a lock of a process that is gone is
# taken over with a warning, and released at the end.
cmake_host_system_information(RESULT train_lock_host QUERY HOSTNAME)
set(train_lock_flags --layers 2 --hidden 32 --heads 4 --seq 16 --global-batch 8 --micro-batch 2
    --steps 1 --eval-interval 0 --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train)
foreach(case "live|1" "stale|999999999")
  string(REPLACE "|" ";" fields "${case}")
  list(GET fields 0 name)
  list(GET fields 1 pid)
  add_test(NAME train_save_lock_${name}_setup
           COMMAND ${CMAKE_COMMAND} -DPATH=${CMAKE_CURRENT_BINARY_DIR}/train_lock_${name}/.lock
                   "-DTEXT={\"run_id\": \"other\", \"host\": \"${train_lock_host}\", \"pid\": ${pid}}"
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/WriteFile.cmake)
  set_tests_properties(train_save_lock_${name}_setup PROPERTIES FIXTURES_SETUP lock_${name})
endforeach()
# A lock that is not one (what a crash right after creating it can leave): one line, exit 2.
add_test(NAME train_save_lock_damaged_setup
         COMMAND ${CMAKE_COMMAND} -DPATH=${CMAKE_CURRENT_BINARY_DIR}/train_lock_damaged/.lock
                 "-DTEXT=garbage" -P ${CMAKE_CURRENT_SOURCE_DIR}/WriteFile.cmake)
set_tests_properties(train_save_lock_damaged_setup PROPERTIES FIXTURES_SETUP lock_damaged)
mpitron_add_expect_test(train_save_lock_damaged TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
  ARGS train ${train_lock_flags} --save ${CMAKE_CURRENT_BINARY_DIR}/train_lock_damaged
  EXPECT_EXIT 2
  EXPECT_OUTPUT "rank 0: error: [^\n]*train_lock_damaged/.lock cannot be read \\(empty or damaged"
                "rank 1: error:")
set_tests_properties(train_save_lock_damaged PROPERTIES FIXTURES_REQUIRED lock_damaged)
# A dangling link in the lock's place is not a lock either (it made the run retry forever).
add_test(NAME train_save_lock_dangling_setup
         COMMAND sh -c "mkdir -p '${CMAKE_CURRENT_BINARY_DIR}/train_lock_dangling' && ln -sfn nowhere '${CMAKE_CURRENT_BINARY_DIR}/train_lock_dangling/.lock'")
set_tests_properties(train_save_lock_dangling_setup PROPERTIES FIXTURES_SETUP lock_dangling)
mpitron_add_expect_test(train_save_lock_dangling TARGET mpitron NP 1 TIMEOUT 60 MAX_SECONDS 30
  ARGS train ${train_lock_flags} --save ${CMAKE_CURRENT_BINARY_DIR}/train_lock_dangling
  EXPECT_EXIT 2
  EXPECT_OUTPUT "rank 0: error: [^\n]*train_lock_dangling/.lock cannot be read")
set_tests_properties(train_save_lock_dangling PROPERTIES FIXTURES_REQUIRED lock_dangling)
mpitron_add_expect_test(train_save_lock_live TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
  ARGS train ${train_lock_flags} --save ${CMAKE_CURRENT_BINARY_DIR}/train_lock_live
  EXPECT_EXIT 2
  EXPECT_OUTPUT "rank 0: error: [^\n]*train_lock_live is in use by run other \\(host ${train_lock_host}, pid 1\\)"
                "rank 1: error:")
mpitron_add_expect_test(train_save_lock_stale TARGET mpitron NP 2 TIMEOUT 60
  ARGS train ${train_lock_flags} --save ${CMAKE_CURRENT_BINARY_DIR}/train_lock_stale
       --overwrite-checkpoints
  EXPECT_EXIT 0
  EXPECT_OUTPUT "warning: --save [^\n]*train_lock_stale: took over the lock of run other \\(host ${train_lock_host}, pid 999999999\\), which is gone"
                "saved checkpoint")
add_test(NAME train_save_lock_released
         COMMAND ${CMAKE_COMMAND} -E rm ${CMAKE_CURRENT_BINARY_DIR}/train_lock_stale/.lock)
set_tests_properties(train_save_lock_live PROPERTIES FIXTURES_REQUIRED lock_live)
set_tests_properties(train_save_lock_stale PROPERTIES FIXTURES_REQUIRED lock_stale
                     FIXTURES_SETUP lock_stale_run)
set_tests_properties(train_save_lock_released PROPERTIES FIXTURES_REQUIRED lock_stale_run
                     WILL_FAIL TRUE)

# A graceful stop on a real signal to a real launcher: SIGUSR1 to mpirun (which forwards it;
# its own SIGTERM and SIGINT kill the ranks after odls_base_sigkill_timeout, docs/train.md), and
# SIGTERM and SIGINT to mpitron run without a launcher (as srun's tasks receive them).
_mpitron_mpiexec_command(stop_launch "{np}" mpitron)
add_test(NAME train_stop_on_sigusr1_through_mpirun
         COMMAND Python3::Interpreter ${CMAKE_CURRENT_SOURCE_DIR}/stop_signal.py --signal USR1
                 --ranks 2 --work ${CMAKE_CURRENT_BINARY_DIR}/stop_usr1 -- ${stop_launch})
foreach(name TERM INT)
  add_test(NAME train_stop_on_sig${name}
           COMMAND Python3::Interpreter ${CMAKE_CURRENT_SOURCE_DIR}/stop_signal.py --signal ${name}
                   --ranks 1 --work ${CMAKE_CURRENT_BINARY_DIR}/stop_${name} --
                   $<TARGET_FILE:mpitron>)
endforeach()
# A run killed by SIGKILL before any save, then started again fresh with the same --metrics:
# its records move to FILE.1 and FILE holds the new run alone (both plot). One rank without a
# launcher, so that the signal kills the rank itself.
add_test(NAME train_metrics_fresh_after_kill
         COMMAND Python3::Interpreter ${CMAKE_CURRENT_SOURCE_DIR}/metrics_restart.py
                 --work ${CMAKE_CURRENT_BINARY_DIR}/metrics_restart -- $<TARGET_FILE:mpitron>)
set_tests_properties(train_metrics_fresh_after_kill PROPERTIES TIMEOUT 120)
# The same with the signal arriving while a step is being saved: the save completes first.
add_test(NAME train_stop_on_sigusr1_mid_save
         COMMAND Python3::Interpreter ${CMAKE_CURRENT_SOURCE_DIR}/stop_signal.py --signal USR1
                 --ranks 2 --mid-save --work ${CMAKE_CURRENT_BINARY_DIR}/stop_mid_save --
                 ${stop_launch})
set_tests_properties(train_stop_on_sigusr1_through_mpirun train_stop_on_sigTERM
                     train_stop_on_sigINT train_stop_on_sigusr1_mid_save PROPERTIES TIMEOUT 120)
mpitron_add_expect_test(train_stop_after_exit_duration TARGET mpitron NP 2 TIMEOUT 120
  ARGS train --layers 2 --hidden 32 --heads 4 --seq 16 --global-batch 8 --micro-batch 2
       --steps 1000000 --eval-interval 0 --exit-duration-in-mins 0.02
       --save ${CMAKE_CURRENT_BINARY_DIR}/stop_duration --overwrite-checkpoints
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train
  EXPECT_EXIT 75
  EXPECT_OUTPUT "stopping at step [0-9]+ on --exit-duration-in-mins 0.02: saved [^\n]*stop_duration/step_[0-9]+")
# eval of a checkpoint whose vocabulary is larger than bytes on a text file without --tokenizer
# warns that the text is scored as bytes (a byte-level model may have a larger vocabulary).
mpitron_add_expect_test(eval_vocab_not_bytes_save TARGET mpitron NP 1 TIMEOUT 60
  ARGS train ${train_small} --vocab 300 --stop-after 1
       --save ${CMAKE_CURRENT_BINARY_DIR}/ckpt_vocab300 --overwrite-checkpoints
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train
  EXPECT_EXIT 0 EXPECT_OUTPUT "saved checkpoint")
mpitron_add_expect_test(eval_vocab_not_bytes TARGET mpitron NP 1 TIMEOUT 60
  ARGS eval --load ${CMAKE_CURRENT_BINARY_DIR}/ckpt_vocab300 --data /usr/share/common-licenses/GPL-3
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train
  EXPECT_EXIT 0
  EXPECT_OUTPUT "warning: --data [^ ]*GPL-3 is read as bytes, but the model's vocab is 300"
                "eval: [^\n]* nats per byte")
set_tests_properties(eval_vocab_not_bytes_save PROPERTIES FIXTURES_SETUP ckpt_vocab300)
set_tests_properties(eval_vocab_not_bytes PROPERTIES FIXTURES_REQUIRED ckpt_vocab300)
# The rate may decay to 0 at the last step (the schedule's last rate is printed).
mpitron_add_expect_test(train_min_lr_zero TARGET mpitron NP 1 TIMEOUT 60
  ARGS train ${train_small} --warmup-steps 0 --min-lr 0 --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train
  EXPECT_EXIT 0 EXPECT_OUTPUT "step 3/3 loss [0-9.]+ lr 0.000e\\+00")
# The clock and the stop signals start before the run loads anything: a limit that passes during
# start-up (0.6 ms here) stops it before the first step, saving nothing, and frees the folder.
mpitron_add_expect_test(train_stop_before_first_step TARGET mpitron NP 2 TIMEOUT 120
  ARGS train --layers 2 --hidden 32 --heads 4 --seq 16 --global-batch 8 --micro-batch 2
       --steps 10 --eval-interval 0 --exit-duration-in-mins 0.00001
       --save ${CMAKE_CURRENT_BINARY_DIR}/stop_startup --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train
  EXPECT_EXIT 75
  EXPECT_OUTPUT "stopping before step 1 on --exit-duration-in-mins 1e-05: nothing new to save"
  REJECT_OUTPUT "step 1/10|saved")
add_test(NAME train_stop_before_first_step_frees_folder
         COMMAND ${CMAKE_COMMAND} -DDIR=${CMAKE_CURRENT_BINARY_DIR}/stop_startup
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/ExpectNoStep.cmake)
set_tests_properties(train_stop_before_first_step_frees_folder PROPERTIES
                     DEPENDS train_stop_before_first_step)

# One command line for a job's first start and its restarts: --load and --save naming one folder
# that holds no step yet starts fresh (and says so); a --load of another empty folder stays an
# error.
set(train_fresh_dir ${CMAKE_CURRENT_BINARY_DIR}/train_fresh)
add_test(NAME train_load_save_fresh_clean COMMAND ${CMAKE_COMMAND} -E rm -rf ${train_fresh_dir})
mpitron_add_expect_test(train_load_save_same_empty_folder_starts_fresh TARGET mpitron NP 2
  TIMEOUT 60
  ARGS train ${train_lock_flags} --load ${train_fresh_dir} --save ${train_fresh_dir}
  EXPECT_EXIT 0
  EXPECT_OUTPUT "--load [^\n]*train_fresh: no checkpoint there yet, so this run starts at step 1"
                "saved checkpoint [^\n]*train_fresh/step_1")
set_tests_properties(train_load_save_fresh_clean PROPERTIES FIXTURES_SETUP train_fresh)
set_tests_properties(train_load_save_same_empty_folder_starts_fresh PROPERTIES
                     FIXTURES_REQUIRED train_fresh)
mpitron_add_expect_test(train_load_other_empty_folder_is_an_error TARGET mpitron NP 2 TIMEOUT 60
  ARGS train ${train_lock_flags} --load ${CMAKE_CURRENT_BINARY_DIR}
       --save ${CMAKE_CURRENT_BINARY_DIR}/train_fresh_other
  EXPECT_EXIT 2 EXPECT_OUTPUT "rank 0: error: [^\n]*no checkpoint step" "rank 1: error:")
# A finished run's steps are not replaced by a fresh run (no --load, another seed and topology):
# refused, naming that run and its latest step; the requeue command line (--load and --save the
# same folder) resumes it (--overwrite-checkpoints there does nothing, with a warning);
# --overwrite-checkpoints replaces its steps, the later ones included.
set(owned ${CMAKE_CURRENT_BINARY_DIR}/train_owned)
set(owned_run "run [0-9a-f]+'s steps up to step")
add_test(NAME train_owned_clean COMMAND ${CMAKE_COMMAND} -E rm -rf ${owned})
mpitron_add_expect_test(train_owned_first_run TARGET mpitron NP 2 TIMEOUT 60
  ARGS train ${train_lock_flags} --steps 4 --save-interval 2 --save ${owned}
  EXPECT_EXIT 0 EXPECT_OUTPUT "saved checkpoint [^\n]*train_owned/step_4")
mpitron_add_expect_test(train_owned_fresh_run_refused TARGET mpitron NP 2 TIMEOUT 60
  ARGS train ${train_lock_flags} --seed 7 --tp 2 --save ${owned}
  EXPECT_EXIT 2
  EXPECT_OUTPUT "rank 0: error: --save [^\n]*train_owned holds ${owned_run} 4: resume that run with --load [^\n]*train_owned, or give --overwrite-checkpoints to replace them"
                "rank 1: error:")
mpitron_add_expect_test(train_owned_requeue_resumes TARGET mpitron NP 2 TIMEOUT 60
  ARGS train ${train_lock_flags} --steps 5 --load ${owned} --save ${owned} --overwrite-checkpoints
  EXPECT_EXIT 0
  EXPECT_OUTPUT "warning: --overwrite-checkpoints does nothing with --load: this run continues"
                "resuming from [^\n]*train_owned step 4" "saved checkpoint [^\n]*train_owned/step_5")
mpitron_add_expect_test(train_owned_overwritten TARGET mpitron NP 2 TIMEOUT 60
  ARGS train ${train_lock_flags} --seed 7 --tp 2 --steps 2 --save ${owned} --overwrite-checkpoints
  EXPECT_EXIT 0
  EXPECT_OUTPUT "warning: --save [^\n]*train_owned: --overwrite-checkpoints removed ${owned_run} 5"
                "saved checkpoint [^\n]*train_owned/step_2")
# The first run's steps 4 and 5 are gone (removing their DONE must fail).
foreach(step 4 5)
  add_test(NAME train_owned_step_${step}_removed
           COMMAND ${CMAKE_COMMAND} -E rm ${owned}/step_${step}/DONE)
  set_tests_properties(train_owned_step_${step}_removed PROPERTIES WILL_FAIL TRUE
                       DEPENDS train_owned_overwritten FIXTURES_REQUIRED train_owned)
endforeach()
set_tests_properties(train_owned_clean PROPERTIES FIXTURES_SETUP train_owned)
set_tests_properties(train_owned_first_run train_owned_fresh_run_refused
                     train_owned_requeue_resumes train_owned_overwritten
                     PROPERTIES FIXTURES_REQUIRED train_owned)
set_tests_properties(train_owned_fresh_run_refused PROPERTIES DEPENDS train_owned_first_run)
set_tests_properties(train_owned_requeue_resumes PROPERTIES DEPENDS train_owned_fresh_run_refused)
set_tests_properties(train_owned_overwritten PROPERTIES DEPENDS train_owned_requeue_resumes)
# Two real runs into one --save folder at once: the second is refused, naming the first.
add_test(NAME train_save_folder_two_runs_at_once
         COMMAND Python3::Interpreter ${CMAKE_CURRENT_SOURCE_DIR}/concurrent_save.py
                 --work ${CMAKE_CURRENT_BINARY_DIR}/two_runs -- $<TARGET_FILE:mpitron>)
set_tests_properties(train_save_folder_two_runs_at_once PROPERTIES TIMEOUT 120)

# --model gpt2 sets vocab 50257 (padded to 50304), block size 1024 and the tanh GELU; the size
# flags given override it. On bytes (the built-in text) it warns that ids above 255 never occur.
mpitron_add_expect_test(train_model_gpt2_overrides TARGET mpitron NP 2 TIMEOUT 120 MAX_SECONDS 60
  ARGS train --model gpt2 --tp 2 --layers 1 --hidden 64 --heads 2 --seq 16 --global-batch 4
       --micro-batch 2 --steps 2 --eval-iters 2 --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_gpt2
       --json ${CMAKE_CURRENT_BINARY_DIR}/train_gpt2.json
  EXPECT_EXIT 0
  EXPECT_OUTPUT "1 layer x hidden 64 x 2 heads, seq 16 \\(positions 1024\\), vocab 50257 \\(padded to 50304\\), tanh GELU;"
                "step 2/2 loss 10\\.[0-9]+"
                "warning: --data \\(the built-in text\\) is read as bytes \\(ids 0-255\\), but the model's vocab is 50257")

# Training on llm.c token shards (tests/app/make_shards.py): GPT-2's vocabulary over a folder of
# train and val shards, llm.c's sequential order, tp 2; and a bad shard is one line, exit 2.
set(shards_dir ${CMAKE_CURRENT_BINARY_DIR}/shards)
add_test(NAME train_shards_make
         COMMAND Python3::Interpreter ${CMAKE_CURRENT_SOURCE_DIR}/make_shards.py ${shards_dir})
set_tests_properties(train_shards_make PROPERTIES FIXTURES_SETUP train_shards)
set(train_shards_small --model gpt2 --layers 1 --hidden 32 --heads 2 --seq 16 --global-batch 4
    --micro-batch 2 --eval-iters 4)
mpitron_add_expect_test(train_shards_tp2_sequential TARGET mpitron NP 2 TIMEOUT 120 MAX_SECONDS 60
  ARGS train --tp 2 --data ${shards_dir}/good --data-order sequential ${train_shards_small}
       --steps 3 --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_shards
  EXPECT_EXIT 0
  EXPECT_OUTPUT "vocab 50257 \\(padded to 50304\\)" "data [^\n]*/shards/good \\(6600 tokens: 6000 train, 600 validation\\)"
                "step 3/3 loss" "step 3 val_loss [0-9.]+ \\([0-9.]+ bits per token\\)")
set_tests_properties(train_shards_tp2_sequential PROPERTIES FIXTURES_REQUIRED train_shards)
# eval takes val shards alone (a glob of them), all of them validation: the 600 tokens of the
# val shard are 37 windows of 16; train refuses the same glob.
mpitron_add_expect_test(train_shards_save TARGET mpitron NP 1 TIMEOUT 120 MAX_SECONDS 60
  ARGS train --data ${shards_dir}/good ${train_shards_small} --steps 1
       --save ${CMAKE_CURRENT_BINARY_DIR}/shards_ckpt --overwrite-checkpoints
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_shards
  EXPECT_EXIT 0 EXPECT_OUTPUT "saved checkpoint")
set_tests_properties(train_shards_save PROPERTIES FIXTURES_REQUIRED train_shards
                     FIXTURES_SETUP train_shards_ckpt)
mpitron_add_expect_test(train_shards_eval_val_alone TARGET mpitron NP 1 TIMEOUT 60 MAX_SECONDS 30
  ARGS eval --load ${CMAKE_CURRENT_BINARY_DIR}/shards_ckpt --data "${shards_dir}/good/*val*.bin"
       --seq 16 --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_shards
  EXPECT_EXIT 0 EXPECT_OUTPUT "good/\\*val\\*\\.bin \\(37 windows of 16 tokens\\): loss")
mpitron_add_expect_test(train_shards_val_alone_refused TARGET mpitron NP 1 TIMEOUT 60 MAX_SECONDS 30
  ARGS train --data "${shards_dir}/good/*val*.bin" ${train_shards_small} --steps 1
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_shards
  EXPECT_EXIT 2 EXPECT_OUTPUT "rank 0: error: [^\n]*good/\\*val\\*\\.bin: no training shards \\(\\*train\\*\\.bin\\)")
set_tests_properties(train_shards_eval_val_alone PROPERTIES FIXTURES_REQUIRED train_shards_ckpt)
set_tests_properties(train_shards_val_alone_refused PROPERTIES FIXTURES_REQUIRED train_shards)
foreach(case "bad_magic|not an llm.c token shard \\(magic 20240521, expected 20240520 or 20240801\\)"
             "truncated|header says 100 tokens"
             "big_token|token 50300 at position 7 is >= vocab 50257")
  string(REPLACE "|" ";" fields "${case}")
  list(GET fields 0 name)
  list(GET fields 1 message)
  mpitron_add_expect_test(train_shards_bad_${name} TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
    ARGS train --data ${shards_dir}/${name}.bin ${train_shards_small} --steps 1
         --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_shards_bad
    EXPECT_EXIT 2 EXPECT_OUTPUT "rank 0: error: [^\n]*${name}.bin: ${message}" "rank 1: error:")
  set_tests_properties(train_shards_bad_${name} PROPERTIES FIXTURES_REQUIRED train_shards)
endforeach()

# --threads: a few steps of the train example (docs/train.md) at 1 and at 2 threads per rank
# have bit-identical losses, gradient norms and validation losses (the kernels' rule,
# src/kernels/cpu/parallel.h), for each GEMM provider that --gemm auto picks at some thread
# count (OpenBLAS whole rows per tile, mpitron's GEMM cut by columns too).
set(threads_providers mpitron)
if(MPITRON_OPENBLAS_INCLUDE_DIR AND MPITRON_OPENBLAS_LIBRARY)
  list(APPEND threads_providers blas)
else()
  list(APPEND threads_providers eigen)
endif()
foreach(provider IN LISTS threads_providers)
  _mpitron_mpiexec_command(threads_launch 1 mpitron train --data /usr/share/common-licenses/GPL-3
    --layers 4 --hidden 256 --heads 8 --seq 128 --global-batch 32 --micro-batch 4 --steps 3
    --lr 1e-3 --min-lr 1e-4 --warmup-steps 20 --eval-interval 3 --eval-iters 2 --device cpu
    --gemm ${provider} --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_threads_${provider})
  add_test(NAME train_threads_same_losses_${provider}
           COMMAND Python3::Interpreter ${CMAKE_CURRENT_SOURCE_DIR}/threads_same_losses.py
                   ${CMAKE_CURRENT_BINARY_DIR}/threads_${provider} -- ${threads_launch})
  set_tests_properties(train_threads_same_losses_${provider} PROPERTIES TIMEOUT 300 PROCESSORS 2)
endforeach()
