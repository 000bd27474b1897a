# Other tools' GPT-2 formats through the real CLI (gpt2_formats_cli.py, after checkpoint.cmake,
# whose launcher and committed checkpoint it uses): `export --format safetensors|hf|llmc` of the
# committed checkpoint hold the same numbers under each tool's names and layout.
set(gpt2_work ${CMAKE_CURRENT_BINARY_DIR}/gpt2_formats)

# NAME NP [args of gpt2_formats_cli.py]: one driver run as a test using up to NP ranks at a time.
function(gpt2_formats_test name np)
  add_test(NAME ${name}
           COMMAND Python3::Interpreter ${CMAKE_CURRENT_SOURCE_DIR}/gpt2_formats_cli.py ${ARGN}
                   --work ${gpt2_work}/${name} -- ${ckpt_launch})
  set_tests_properties(${name} PROPERTIES TIMEOUT 120 PROCESSORS ${np})
endfunction()

gpt2_formats_test(gpt2_formats_exports 1 exports --load ${ckpt_tiny})
# train --init-from a file of each format, then export in that format: the same bytes.
gpt2_formats_test(gpt2_formats_roundtrip 4 roundtrip)
# generate and eval --init-from an llm.c file, its Hugging Face export and its bfloat16 llm.c export:
# the text and loss of --load of the same weights.
gpt2_formats_test(gpt2_formats_generate_init_from 2 generate)

# Bad --init-from: one line on every rank, exit code 2.
set(sample ${PROJECT_SOURCE_DIR}/tests/data/llmc_sample_f32.bin)
set(hf_sample ${PROJECT_SOURCE_DIR}/tests/data/hf_gpt2_sample.safetensors)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/empty_init_from.bin "")
foreach(case
    "hidden|${sample}|--seq 16 --hidden 32|--init-from [^\n]*llmc_sample_f32.bin: the file has hidden 16, --hidden 32"
    "vocab_larger|${sample}|--seq 16 --vocab 128|--vocab 128 is larger than the file's vocab 70 .its wte rows from 70 on are padding."
    "byte_vocab|${sample}|--seq 16|the --init-from vocab 70 cannot hold the 256 byte values"
    "no_heads|${hf_sample}|--seq 16|--init-from [^\n]*hf_gpt2_sample.safetensors: a safetensors file does not record the number of attention heads: give --heads"
    "neither|${ckpt_text}||--init-from [^\n]*checkpoint_eval.txt: not an llm.c model file .magic [-0-9]+, expected 20240326. or a safetensors file"
    "empty|${CMAKE_CURRENT_BINARY_DIR}/empty_init_from.bin||--init-from [^\n]*empty_init_from.bin: empty file .0 bytes., not an llm.c model file or a safetensors file")
  string(REPLACE "|" ";" fields "${case}")
  list(GET fields 0 name)
  list(GET fields 1 file)
  list(GET fields 2 flags)
  list(GET fields 3 message)
  separate_arguments(flags)
  mpitron_add_expect_test(gpt2_formats_bad_init_from_${name} TARGET mpitron NP 2 TIMEOUT 60
    MAX_SECONDS 30
    ARGS train --tp 2 --init-from ${file} ${flags} --log-dir ${gpt2_work}/logs_bad
    EXPECT_EXIT 2 EXPECT_OUTPUT "rank 0: error: [^\n]*${message}" "rank 1: error: ")
endforeach()

# --init-from a file with a NaN, an infinity and a negative infinity in one tensor: refused at
# load with one line naming the tensor and the count (not a diverged first step).
foreach(setup "llmc|${sample}|llmc.bin|" "hf|${hf_sample}|hf.safetensors|--tensor;h.0.ln_2.weight")
  string(REPLACE "|" ";" fields "${setup}")
  list(GET fields 0 name)
  list(GET fields 1 source)
  list(GET fields 2 file)
  list(SUBLIST fields 3 -1 flags)
  add_test(NAME gpt2_formats_non_finite_setup_${name}
           COMMAND Python3::Interpreter ${CMAKE_CURRENT_SOURCE_DIR}/plant_non_finite.py ${source}
                   ${gpt2_work}/non_finite/${file} ${flags})
  set_tests_properties(gpt2_formats_non_finite_setup_${name} PROPERTIES
                       FIXTURES_SETUP gpt2_non_finite)
endforeach()
foreach(case
    "llmc|llmc.bin|--seq 16|transformer.wte.weight holds 3 non-finite values .NaN or infinite. of 2048"
    "hf|hf.safetensors|--seq 16 --heads 2|transformer.h.0.ln_2.weight holds 3 non-finite values .NaN or infinite. of 16")
  string(REPLACE "|" ";" fields "${case}")
  list(GET fields 0 name)
  list(GET fields 1 file)
  list(GET fields 2 flags)
  list(GET fields 3 message)
  separate_arguments(flags)
  set(line "--init-from [^\n]*non_finite/${file}: tensor ${message}")
  mpitron_add_expect_test(gpt2_formats_non_finite_${name} TARGET mpitron NP 2 TIMEOUT 60
    MAX_SECONDS 30
    ARGS train --tp 2 --init-from ${gpt2_work}/non_finite/${file} ${flags}
         --log-dir ${gpt2_work}/logs_bad
    EXPECT_EXIT 2 EXPECT_OUTPUT "rank 0: error: ${line}" "rank 1: error: ${line}")
  set_tests_properties(gpt2_formats_non_finite_${name} PROPERTIES
                       FIXTURES_REQUIRED gpt2_non_finite)
endforeach()

# Finite weights of 3.39e38 (plant_non_finite.py --huge; below bfloat16's rounding to infinity)
# are taken at load and overflow float32: generate stops before drawing from NaN logits, and
# train names the weights it started from, not the learning rate; one line on every rank, exit 1.
add_test(NAME gpt2_formats_huge_setup
         COMMAND Python3::Interpreter ${CMAKE_CURRENT_SOURCE_DIR}/plant_non_finite.py
                 ${PROJECT_SOURCE_DIR}/tests/data/gpt_export_expected.safetensors
                 ${gpt2_work}/huge/gpt.safetensors --tensor transformer.h.0.ln_2.weight --huge)
set_tests_properties(gpt2_formats_huge_setup PROPERTIES FIXTURES_SETUP gpt2_huge)
mpitron_add_expect_test(gpt2_formats_huge_generate TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
  ARGS generate --tp 2 --bf16 --init-from ${gpt2_work}/huge/gpt.safetensors --heads 2 --prompt ab
       --tokens 3 --log-dir ${gpt2_work}/logs_huge
  EXPECT_EXIT 1
  EXPECT_OUTPUT "rank 0: error: generate: [^\n]*gpt.safetensors: the logits of generated token 1 hold NaN: the model's values overflow float32 on this prompt"
                "rank 1: error: generate: [^\n]*: the logits of generated token 1 hold NaN")
mpitron_add_expect_test(gpt2_formats_huge_train TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
  ARGS train --tp 2 --init-from ${gpt2_work}/huge/gpt.safetensors --heads 2 --seq 8 --steps 2
       --log-dir ${gpt2_work}/logs_huge
  EXPECT_EXIT 1
  EXPECT_OUTPUT "rank 0: error: the loss at step 1 is NaN, from the weights this run started from .before any update.: the model's values overflow float32 on this data"
                "rank 1: error: the loss at step 1 is NaN, from the weights this run started from")
set_tests_properties(gpt2_formats_huge_generate gpt2_formats_huge_train PROPERTIES
                     FIXTURES_REQUIRED gpt2_huge)

# export --dtype bfloat16 writes llm.c's version 5 (and BF16 safetensors), which --init-from reads
# back (bfloat16 widens exactly).
mpitron_add_expect_test(gpt2_formats_export_bf16 TARGET mpitron NP 1 TIMEOUT 60 MAX_SECONDS 30
  ARGS export --load ${ckpt_tiny} --format llmc --dtype bfloat16 --out ${gpt2_work}/tiny_bf16.bin
       --log-dir ${gpt2_work}/logs_bf16
  EXPECT_EXIT 0 EXPECT_OUTPUT "export: wrote [^\n]*tiny_bf16.bin .llm.c bfloat16, 2 layers")
mpitron_add_expect_test(gpt2_formats_init_from_bf16 TARGET mpitron NP 1 TIMEOUT 60 MAX_SECONDS 30
  ARGS train --init-from ${gpt2_work}/tiny_bf16.bin --seq 16 --steps 1 --global-batch 2
       --micro-batch 2 --eval-interval 0 --log-dir ${gpt2_work}/logs_bf16
  EXPECT_EXIT 0 EXPECT_OUTPUT "initialised from --init-from [^\n]*tiny_bf16.bin"
                              "warning: --init-from [^\n]*tiny_bf16.bin stores bfloat16 weights: they are widened to float32 exactly")
set_tests_properties(gpt2_formats_init_from_bf16 PROPERTIES DEPENDS gpt2_formats_export_bf16)
# With --bf16 the GEMMs round the widened weights back to the same bits: no warning.
mpitron_add_expect_test(gpt2_formats_init_from_bf16_into_bf16 TARGET mpitron NP 1 TIMEOUT 60
  MAX_SECONDS 30
  ARGS train --init-from ${gpt2_work}/tiny_bf16.bin --bf16 --seq 16 --steps 1 --global-batch 2
       --micro-batch 2 --eval-interval 0 --log-dir ${gpt2_work}/logs_bf16
  EXPECT_EXIT 0 EXPECT_OUTPUT "initialised from --init-from [^\n]*tiny_bf16.bin"
  REJECT_OUTPUT "stores bfloat16 weights")
set_tests_properties(gpt2_formats_init_from_bf16_into_bf16 PROPERTIES
                     DEPENDS gpt2_formats_export_bf16)
# A BF16 safetensors file warns as well.
mpitron_add_expect_test(gpt2_formats_export_bf16_safetensors TARGET mpitron NP 1 TIMEOUT 60
  MAX_SECONDS 30
  ARGS export --load ${ckpt_tiny} --format safetensors --dtype bfloat16
       --out ${gpt2_work}/tiny_bf16.safetensors --log-dir ${gpt2_work}/logs_bf16
  EXPECT_EXIT 0 EXPECT_OUTPUT "export: wrote [^\n]*tiny_bf16.safetensors")
mpitron_add_expect_test(gpt2_formats_init_from_bf16_safetensors TARGET mpitron NP 1 TIMEOUT 60
  MAX_SECONDS 30
  ARGS train --init-from ${gpt2_work}/tiny_bf16.safetensors --heads 4 --seq 16 --steps 1
       --global-batch 2 --micro-batch 2 --eval-interval 0 --log-dir ${gpt2_work}/logs_bf16
  EXPECT_EXIT 0
  EXPECT_OUTPUT "warning: --init-from [^\n]*tiny_bf16.safetensors stores bfloat16 weights: they are widened to float32 exactly")
set_tests_properties(gpt2_formats_init_from_bf16_safetensors PROPERTIES
                     DEPENDS gpt2_formats_export_bf16_safetensors)
# eval names the conversion where it names the weights.
mpitron_add_expect_test(gpt2_formats_eval_init_from_bf16 TARGET mpitron NP 1 TIMEOUT 60
  MAX_SECONDS 30
  ARGS eval --init-from ${gpt2_work}/tiny_bf16.bin --data ${PROJECT_SOURCE_DIR}/tests/data/checkpoint_eval.txt
       --log-dir ${gpt2_work}/logs_bf16
  EXPECT_EXIT 0
  EXPECT_OUTPUT "eval: [^\n]*tiny_bf16.bin .bfloat16 weights, widened to float32. on [^\n]*loss")
set_tests_properties(gpt2_formats_eval_init_from_bf16 PROPERTIES DEPENDS gpt2_formats_export_bf16)

# eval and generate agree on the model as read: ranks given another --gelu (or --heads) for the
# same --init-from file are refused at start-up, one line on every rank, exit code 2.
set(differs "configuration differs between ranks: rank 0 runs [^\n]*\"gelu\":\"erf\"[^\n]*rank 1 runs [^\n]*\"gelu\":\"tanh\"")
set(rank_args generate --init-from ${hf_sample} --heads 4 --prompt 0 --tp 2
              --log-dir ${gpt2_work}/logs_gelu_agree)
add_test(NAME gpt2_formats_generate_gelu_ranks_disagree
         COMMAND ${CMAKE_COMMAND} -DEXPECT_EXIT=2
                 "-DEXPECT_OUTPUT=rank 0: error: ${differs}\\;rank 1: error: ${differs}"
                 -DMAX_SECONDS=30 -P ${PROJECT_SOURCE_DIR}/cmake/ExpectRun.cmake --
                 ${MPIEXEC_EXECUTABLE} ${MPITRON_MPIEXEC_RESOLVED_PREFLAGS}
                 -n 1 $<TARGET_FILE:mpitron> ${rank_args} --gelu erf :
                 -n 1 $<TARGET_FILE:mpitron> ${rank_args} --gelu tanh)
set_tests_properties(gpt2_formats_generate_gelu_ranks_disagree PROPERTIES TIMEOUT 60 PROCESSORS 2)
