# Context parallelism through the real CLI (docs/context-parallel.md): validate's GPT checks on
# 4-D topologies, resuming across cp, eval at cp 2 and 4 against cp 1 and the PyTorch peer, and
# the one-line errors of its flags. Uses checkpoint.cmake's checkpoint_cli_test and
# cli_input.cmake's cli_bad_test.

# (name ranks tp cp pp dp): validate's checks, the COMBINED+CP GPT checks among them, against the
# dense model; the issue's 4-D topologies.
foreach(run "cp2 2 1 2 1 1" "tp2_cp2 4 2 2 1 1" "cp2_pp2 4 1 2 2 1" "cp2_dp2 4 1 2 1 2"
            "tp2_cp2_pp2 8 2 2 2 1")
  string(REGEX REPLACE " +" ";" fields "${run}")
  list(GET fields 0 name)
  list(GET fields 1 np)
  list(GET fields 2 tp)
  list(GET fields 3 cp)
  list(GET fields 4 pp)
  list(GET fields 5 dp)
  mpitron_add_expect_test(validate_${name} TARGET mpitron NP ${np} TIMEOUT 600
    ARGS validate --tp ${tp} --cp ${cp} --pp ${pp} --dp ${dp}
         --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_${name}
    EXPECT_EXIT 0
    EXPECT_OUTPUT "x cp ${cp} .ring. x" "PASS  COMBINED\\+CP .1 micro-batch.: GPT loss and gradients"
                  "PASS  COMBINED\\+SP\\+CP" "all parallel validations passed"
    REJECT_OUTPUT "FAIL")
endforeach()
# The all-gather form on one of them.
mpitron_add_expect_test(validate_cp2_all_gather TARGET mpitron NP 2 TIMEOUT 600
  ARGS validate --cp 2 --cp-comm all-gather --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_cp2_ag
  EXPECT_EXIT 0 EXPECT_OUTPUT "x cp 2 .all-gather. x" "all parallel validations passed"
  REJECT_OUTPUT "FAIL")

# The planted faults of CP each fail the 4-D GPT check at cp 2: chunks in the wrong order,
# partial attention merged without the log-sum-exp correction, key/value gradients that never
# reach their owner, and gradients summed instead of averaged over dp x cp.
foreach(fault cp-zigzag-chunks-swapped ring-attention-no-lse-correction
              ring-attention-dkv-not-returned dp-sum-not-average)
  mpitron_add_expect_test(validate_cp_step_fault_${fault} TARGET mpitron NP 2 TIMEOUT 240
    ARGS validate --device cpu --cp 2 --inject-fault ${fault}
         --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_cp_fault
    EXPECT_EXIT 1
    EXPECT_OUTPUT "FAIL  COMBINED\\+CP .1 micro-batch.: GPT loss and gradients"
                  "one or more parallel validations FAILED")
endforeach()

# A cp rank whose shard has no counted target (the ignored-targets GPT check): dividing each
# shard's sum by its own count instead of the sequence's count / cp fails that check alone.
mpitron_add_expect_test(validate_cp_step_fault_cp-loss-local-mean TARGET mpitron NP 2 TIMEOUT 240
  ARGS validate --device cpu --cp 2 --inject-fault cp-loss-local-mean
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_cp_fault
  EXPECT_EXIT 1
  EXPECT_OUTPUT "FAIL  COMBINED\\+CP ignored targets .1 micro-batch.: GPT loss and gradients"
                "PASS  COMBINED\\+CP .1 micro-batch.: GPT loss and gradients")

# A checkpoint saved at cp 2 resumes at tp 2, and one saved on one rank resumes at cp 2 with dp 2
# and the distributed optimizer (its moments sharded over dp x cp): the next steps within 1e-5,
# as across the other axes.
checkpoint_cli_test(checkpoint_resume_cp2_to_tp2 2 resume --from 1,1,1,2 --to 2,1,1 --rtol 1e-5)
checkpoint_cli_test(checkpoint_resume_np1_to_cp2_dp2 4
                    resume --from 1,1,1 --to 1,1,2,2 --distributed-optimizer resumed --rtol 1e-5)
# eval at cp 2 and 4 gives cp 1's loss (1e-5, float32 sums in another order), and the PyTorch
# peer's within the peer tests' 1e-4.
checkpoint_cli_test(checkpoint_eval_cp 4
                    eval --load ${ckpt_tiny} --data ${ckpt_text} --at 1,1,1 --at 1,1,1,2
                    --at 1,1,1,4 --at 2,1,1,2 --rtol 1e-5)
checkpoint_cli_test(checkpoint_eval_cp_peer_golden 4
                    eval --load ${ckpt_tiny} --data ${ckpt_text} --at 1,1,1,4
                    --golden ${PROJECT_SOURCE_DIR}/tests/data/checkpoint_golden.json --rtol 1e-4)

# Bad input: one line on every rank, exit 2.
cli_bad_test(cp_not_dividing 4 "world size 4 is not divisible by cp 3" train --cp 3)
cli_bad_test(cp_product 4 "tp*cp*pp*dp = 1*2*1*1 = 2, but the world size is 4"
             train --cp 2 --dp 1)
cli_bad_test(cp_seq 2 "--seq 10 does not split into 2*cp = 4 equal zigzag chunks (--cp 2): --seq 8 would"
             train --cp 2 --seq 10)
cli_bad_test(cp_seq_sequence_parallel 8 "--sequence-parallel needs --seq / cp = 6 divisible by tp 4"
             train --tp 4 --cp 2 --seq 12 --sequence-parallel)
cli_bad_test(cp_comm_unknown 2 "--cp-comm: star not in {ring,all-gather} (see --help)"
             train --cp 2 --cp-comm star)
cli_bad_test(cp_zero 2 "--cp: must be an integer in [1, 2147483647], got 0 (see --help)"
             validate --cp 0)
cli_bad_test(validate_cp_seq 2 "--seq 6 does not split into 2*cp = 4 equal zigzag chunks (--cp 2): --seq 4 would"
             validate --cp 2 --seq 6)
cli_bad_test(eval_cp_seq 2 "--seq 10 does not split into 2*cp = 4 equal zigzag chunks (--cp 2): --seq 8 would"
             eval --load ${cli_ckpt} --data ${cli_text} --cp 2 --seq 10)
cli_bad_test(generate_cp 2
             "generate decodes one token at a time and does not split sequences: --cp must be 1"
             generate --load ${cli_ckpt} --prompt x --cp 2)
