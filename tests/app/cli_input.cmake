# Input a new user gets wrong, through the real CLI: one line naming the option and its value on
# every rank, exit 2, before any work; and the topology rule for partly given --tp/--pp/--dp.
set(cli_ckpt ${PROJECT_SOURCE_DIR}/tests/data/checkpoint_tiny)
set(cli_text ${PROJECT_SOURCE_DIR}/tests/data/checkpoint_eval.txt)
set(cli_logs --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_cli)

# name|arguments|message (2 ranks: the default topology (2, 1, 1) fits the tiny checkpoint).
set(cli_bad_runs
  "generate_tokens_range|generate --load ${cli_ckpt} --prompt x --tokens 99999999999|--tokens must be in [0, 1000000], got 99999999999"
  "generate_top_k|generate --load ${cli_ckpt} --prompt x --top-k -1|--top-k must be >= 0, got -1"
  "generate_temperature|generate --load ${cli_ckpt} --prompt x --temperature nan|--temperature must be a finite number >= 0, got nan"
  "eval_seq_zero|eval --load ${cli_ckpt} --data ${cli_text} --seq 0|--seq must be in [1, 16] (the checkpoint's block size), got 0"
  "eval_data_directory|eval --load ${cli_ckpt} --data ${CMAKE_CURRENT_BINARY_DIR}|${CMAKE_CURRENT_BINARY_DIR}: is a directory"
  "train_data_directory|train --seq 16 --steps 1 --data ${CMAKE_CURRENT_BINARY_DIR}|${CMAKE_CURRENT_BINARY_DIR}: is a directory"
  "unknown_subcommand|trian|unknown subcommand 'trian' (run mpitron --help)")
foreach(run IN LISTS cli_bad_runs)
  string(REPLACE "|" ";" fields "${run}")
  list(GET fields 0 name)
  list(GET fields 1 flags)
  list(GET fields 2 message)
  separate_arguments(flags)
  string(REGEX REPLACE "([][().*+])" "\\\\\\1" message_regex "${message}")
  mpitron_add_expect_test(cli_bad_${name} TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
    ARGS ${flags} ${cli_logs}
    EXPECT_EXIT 2
    EXPECT_OUTPUT "rank 0: error: ${message_regex}\n" "rank 1: error: ${message_regex}\n")
endforeach()

# --dp omitted: dp = world / (tp*pp) (Megatron-LM's rule); --dp given: an omitted --tp/--pp is 1.
mpitron_add_expect_test(cli_validate_tp_only_fills_dp TARGET mpitron NP 4 TIMEOUT 240
  ARGS validate --tp 2 ${cli_logs}
  EXPECT_EXIT 0 EXPECT_OUTPUT "world 4 = tp 2 x pp 1 x dp 2" "all parallel validations passed"
  REJECT_OUTPUT "FAIL")
set(cli_topology_runs
  "tp_not_dividing|--tp 3|world size 4 is not divisible by tp\\*pp = 3 \\(tp 3, pp 1, --dp omitted\\)"
  "dp_only|--dp 2|tp\\*pp\\*dp = 1\\*1\\*2 = 2, but the world size is 4")
foreach(run IN LISTS cli_topology_runs)
  string(REPLACE "|" ";" fields "${run}")
  list(GET fields 0 name)
  list(GET fields 1 flags)
  list(GET fields 2 message_regex)
  separate_arguments(flags)
  mpitron_add_expect_test(cli_validate_bad_${name} TARGET mpitron NP 4 TIMEOUT 60 MAX_SECONDS 30
    ARGS validate ${flags} ${cli_logs}
    EXPECT_EXIT 2
    EXPECT_OUTPUT "rank 0: error: ${message_regex}\n" "rank 3: error: ${message_regex}\n")
endforeach()

# --help names the type of --seed once (its check adds no second name).
mpitron_add_expect_test(cli_help_seed_type TARGET mpitron NP 1 TIMEOUT 60
  ARGS train --help EXPECT_EXIT 0 EXPECT_OUTPUT "--seed UINT=0 " REJECT_OUTPUT "UINT:UINT")
