# Real `mpitron train-dp` and `mpitron attention` runs, and the attention check of `validate`.
# Included from tests/app/CMakeLists.txt.

# train-dp: the reference's 2-rank job, 4 ranks for 3 epochs, and the optional paths.
mpitron_add_expect_test(train_dp_np2 TARGET mpitron NP 2 TIMEOUT 120 MAX_SECONDS 60
  ARGS train-dp --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_dp
  EXPECT_EXIT 0
  EXPECT_OUTPUT "rank 0 epoch 1 loss [0-9.]+" "rank 1 epoch 5 loss [0-9.]+"
                "train-dp done: 5 epochs x 16 steps on 2 ranks.*replicas in sync"
  REJECT_OUTPUT "error")
mpitron_add_expect_test(train_dp_np4_epochs3 TARGET mpitron NP 4 TIMEOUT 120 MAX_SECONDS 60
  ARGS train-dp --epochs 3 --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_dp
  EXPECT_EXIT 0
  EXPECT_OUTPUT "rank 3 epoch 3 loss [0-9.]+" "3 epochs x 8 steps on 4 ranks.*replicas in sync"
  REJECT_OUTPUT "error")
# 1001 samples on 4 ranks: 250 each with --drop-last (10 steps of 25), 251 padded (11 steps).
mpitron_add_expect_test(train_dp_mlp_drop_last TARGET mpitron NP 4 TIMEOUT 120 MAX_SECONDS 60
  ARGS train-dp --samples 1001 --drop-last --hidden 16 --momentum 0.9 --epochs 2
       --batch-size 25 --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_dp
  EXPECT_EXIT 0 EXPECT_OUTPUT "MLP \\(hidden 16\\)" "2 epochs x 10 steps on 4 ranks"
  REJECT_OUTPUT "error")
mpitron_add_expect_test(train_dp_padded TARGET mpitron NP 4 TIMEOUT 120 MAX_SECONDS 60
  ARGS train-dp --samples 1001 --epochs 1 --batch-size 25
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_dp
  EXPECT_EXIT 0 EXPECT_OUTPUT "1 epoch x 11 steps on 4 ranks" REJECT_OUTPUT "error")

# --data: a 10-sample CSV with a header (5 samples per rank: 3 steps of 2), and bad files.
set(train_dp_csv ${CMAKE_CURRENT_BINARY_DIR}/train_dp_small.csv)
file(WRITE ${train_dp_csv} "x1,x2,y\n")
foreach(i RANGE 9)
  math(EXPR y "2 * ${i} - 3")
  file(APPEND ${train_dp_csv} "${i},-1.5,${y}\n")
endforeach()
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/train_dp_bad.csv "1,2,3\n4,5,6\n7,8\n")
mpitron_add_expect_test(train_dp_csv TARGET mpitron NP 2 TIMEOUT 120 MAX_SECONDS 60
  ARGS train-dp --data ${train_dp_csv} --features 2 --targets 1 --epochs 2 --batch-size 2
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_dp
  EXPECT_EXIT 0
  EXPECT_OUTPUT "10 samples x 2 features -> 1 target" "2 epochs x 3 steps on 2 ranks"
  REJECT_OUTPUT "error")
mpitron_add_expect_test(train_dp_bad_csv TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
  ARGS train-dp --data ${CMAKE_CURRENT_BINARY_DIR}/train_dp_bad.csv --features 2
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_dp
  EXPECT_EXIT 2
  EXPECT_OUTPUT "rank 0: error: .*train_dp_bad.csv:3: expected 3 columns"
                "rank 1: error: .*train_dp_bad.csv:3")
mpitron_add_expect_test(train_dp_missing_csv TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
  ARGS train-dp --data ${CMAKE_CURRENT_BINARY_DIR}/no_such_file.csv
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_dp
  EXPECT_EXIT 2 EXPECT_OUTPUT "rank 1: error: cannot open data file")
mpitron_add_expect_test(train_dp_bad_topology TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
  ARGS train-dp --tp 2
  EXPECT_EXIT 2 EXPECT_OUTPUT "rank 0: error: train-dp is data-parallel only")
# Proof that the replica check can fail: a perturbed replica must stop the run loudly.
mpitron_add_expect_test(train_dp_replica_drift TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
  ARGS train-dp --inject-fault replica-drift --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_dp
  EXPECT_EXIT 1
  EXPECT_OUTPUT "rank 0: error: replicas diverged after epoch 1: max \\|parameter - dp rank 0's\\| = 1.000e-03"
                "rank 1: error: replicas diverged after epoch 1.*worst here: fc.weight"
  REJECT_OUTPUT "train-dp done")
mpitron_add_expect_test(train_dp_no_replica_check TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
  ARGS train-dp --inject-fault replica-drift --no-check-replicas --epochs 2
       --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_dp
  EXPECT_EXIT 0 EXPECT_OUTPUT "train-dp done: 2 epochs x 16 steps on 2 ranks.*s\n"
  REJECT_OUTPUT "replicas")

# attention: the reference's default shape (embed 512, 8 heads, [128, 8, 512]) on 2 and 4 ranks.
foreach(tp 2 4)
  mpitron_add_expect_test(attention_tp${tp} TARGET mpitron NP ${tp} TIMEOUT 120 MAX_SECONDS 60
    ARGS attention --tp ${tp} --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_attention
    EXPECT_EXIT 0
    EXPECT_OUTPUT "attention tp=${tp} dp=1 embed=512 heads=8 input \\[128, 8, 512\\]"
                  "output mean [-0-9.e]+" "PASS  max \\|tp - dense\\|" "time per forward [0-9.]+ ms"
    REJECT_OUTPUT "FAIL")
endforeach()
mpitron_add_expect_test(attention_tp2_arange TARGET mpitron NP 2 TIMEOUT 120 MAX_SECONDS 60
  ARGS attention --tp 2 --init arange --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_attention
  EXPECT_EXIT 0 EXPECT_OUTPUT "init=arange" "PASS  max \\|tp - dense\\|" REJECT_OUTPUT "FAIL")
mpitron_add_expect_test(attention_bad_heads TARGET mpitron NP 4 TIMEOUT 60 MAX_SECONDS 30
  ARGS attention --tp 4 --heads 6
  EXPECT_EXIT 2
  EXPECT_OUTPUT "rank 0: error: --heads 6 is not divisible by tp 4"
                "rank 3: error: --heads 6 is not divisible by tp 4")
mpitron_add_expect_test(attention_bad_embed TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
  ARGS attention --tp 2 --embed 100
  EXPECT_EXIT 2 EXPECT_OUTPUT "rank 1: error: --embed 100 is not divisible by --heads 8")

# validate's attention check passes on 4 TP ranks and fails when a TP rule is broken.
mpitron_add_expect_test(validate_attention_tp4 TARGET mpitron NP 4 TIMEOUT 240
  ARGS validate --tp 4 --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_validate_attention
  EXPECT_EXIT 0
  EXPECT_OUTPUT "PASS  TP: attention forward and gradients match dense reference"
  REJECT_OUTPUT "FAIL")
foreach(fault row-bias-every-rank copy-to-tp-no-all-reduce)
  mpitron_add_expect_test(validate_attention_fault_${fault} TARGET mpitron NP 2 TIMEOUT 240
    ARGS validate --tp 2 --inject-fault ${fault}
         --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_validate_attention
    EXPECT_EXIT 1 EXPECT_OUTPUT "FAIL  TP: attention forward and gradients match dense reference")
endforeach()
