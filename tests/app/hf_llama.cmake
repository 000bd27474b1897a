# Hugging Face Llama folders through the real CLI (hf_llama_cli.py, after checkpoint.cmake, whose
# launcher it uses): `train --init-from FOLDER` then `export --format hf` gives the folder back,
# bit for bit in float32, and `export --dtype bfloat16` rounds to nearest even.
set(hf_llama_work ${CMAKE_CURRENT_BINARY_DIR}/hf_llama)
add_test(NAME hf_llama_roundtrip
         COMMAND Python3::Interpreter ${CMAKE_CURRENT_SOURCE_DIR}/hf_llama_cli.py roundtrip
                 --data ${PROJECT_SOURCE_DIR}/tests/data --work ${hf_llama_work}/roundtrip
                 -- ${ckpt_launch})
set_tests_properties(hf_llama_roundtrip PROPERTIES TIMEOUT 300 PROCESSORS 4)
# eval --init-from a folder: the loss of eval --load of a checkpoint of the same weights.
add_test(NAME hf_llama_eval_init_from
         COMMAND Python3::Interpreter ${CMAKE_CURRENT_SOURCE_DIR}/hf_llama_cli.py eval
                 --data ${PROJECT_SOURCE_DIR}/tests/data --work ${hf_llama_work}/eval
                 -- ${ckpt_launch})
set_tests_properties(hf_llama_eval_init_from PROPERTIES TIMEOUT 120 PROCESSORS 2)

# Bad --init-from of a folder: one line on every rank, exit code 2.
set(hf_tied ${PROJECT_SOURCE_DIR}/tests/data/hf_llama_tied)
set(llmc_sample ${PROJECT_SOURCE_DIR}/tests/data/llmc_sample_f32.bin)
foreach(case
    "kv_heads|--init-from ${hf_tied} --kv-heads 4|--init-from [^\n]*hf_llama_tied: config.json has kv-heads 2, --kv-heads 4"
    "model_vocab|--init-from ${hf_tied} --model smollm-135m|--init-from [^\n]*hf_llama_tied: config.json has vocab 256, --model smollm-135m's vocab 49152"
    "seq_block_size|--init-from ${hf_tied} --seq 600|--seq 600 is longer than the block size 512 of --init-from [^\n]*hf_llama_tied"
    "untie|--init-from ${hf_tied} --arch llama --untie-embeddings|config.json has tie_word_embeddings true, --untie-embeddings true"
    "arch_gpt2|--init-from ${hf_tied} --arch gpt2|--init-from [^\n]*hf_llama_tied: a Hugging Face Llama folder, but --arch gpt2"
    "gpt2_file|--arch llama --init-from ${llmc_sample}|--init-from [^\n]*llmc_sample_f32.bin: --arch llama reads a Hugging Face Llama folder")
  string(REPLACE "|" ";" fields "${case}")
  list(GET fields 0 name)
  list(GET fields 1 flags)
  list(GET fields 2 message)
  separate_arguments(flags)
  mpitron_add_expect_test(hf_llama_bad_init_from_${name} TARGET mpitron NP 2 TIMEOUT 60
    MAX_SECONDS 30
    ARGS train --tp 2 --seq 8 ${flags} --log-dir ${hf_llama_work}/logs_bad
    EXPECT_EXIT 2 EXPECT_OUTPUT "rank 0: error: [^\n]*${message}" "rank 1: error: ")
endforeach()

# Ranks that give the same --init-from path but read other folders (each rank's working folder
# holds its own `model`) end with one line: the folder's rope_scaling and the weights'
# fingerprint are part of the configuration the ranks agree on.
foreach(difference rope_scaling weights)
  set(work ${hf_llama_work}/per_rank_${difference})
  add_test(NAME hf_llama_per_rank_${difference}_setup
           COMMAND Python3::Interpreter ${CMAKE_CURRENT_SOURCE_DIR}/per_rank_folders.py
                   ${PROJECT_SOURCE_DIR}/tests/data/hf_llama_scaled ${work} ${difference})
  set_tests_properties(hf_llama_per_rank_${difference}_setup PROPERTIES
                       FIXTURES_SETUP hf_llama_per_rank_${difference})
  set(rank_args train --seq 8 --steps 1 --init-from model --log-dir ${work}/logs)
  if(difference STREQUAL "rope_scaling")
    set(differs "\"rope_scaling\":")
  else()
    set(differs "\"init_from_fnv\":\"")
  endif()
  add_test(NAME hf_llama_per_rank_${difference}
           COMMAND ${CMAKE_COMMAND} -DEXPECT_EXIT=2
                   "-DEXPECT_OUTPUT=rank 0: error: configuration differs between ranks: [^\n]*${differs}"
                   -DMAX_SECONDS=30 -P ${PROJECT_SOURCE_DIR}/cmake/ExpectRun.cmake --
                   ${MPIEXEC_EXECUTABLE} ${MPITRON_MPIEXEC_RESOLVED_PREFLAGS}
                   -n 1 -wdir ${work}/a $<TARGET_FILE:mpitron> ${rank_args} :
                   -n 1 -wdir ${work}/b $<TARGET_FILE:mpitron> ${rank_args})
  set_tests_properties(hf_llama_per_rank_${difference} PROPERTIES TIMEOUT 60 PROCESSORS 2
                       FIXTURES_REQUIRED hf_llama_per_rank_${difference})
endforeach()
