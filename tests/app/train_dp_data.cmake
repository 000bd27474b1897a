# train-dp --data: garbage is rejected with file:line before any training, a byte-order mark is
# skipped, --header decides about the first row, and the banner states what each rank reads.
set(data_dir ${CMAKE_CURRENT_BINARY_DIR}/train_dp_data)
set(data_logs --log-dir ${CMAKE_CURRENT_BINARY_DIR}/logs_train_dp_data)
file(MAKE_DIRECTORY ${data_dir})
foreach(bad "nan|1,2,3\n4,nan,6\n|:2: the field 'nan' is not a finite number"
            "inf|1,2,3\n4,5,-inf\n|:2: the field '-inf' is not a finite number"
            "float32|x,y,z\n1,2,3\n1e39,5,6\n|:3: the field '1e39' is beyond float32's range"
            "question|1,2,3\n4,?,6\n|:2: the field '\\?' is not a number")
  string(REPLACE "|" ";" fields "${bad}")
  list(GET fields 0 name)
  list(GET fields 1 text)
  list(GET fields 2 message)
  string(REPLACE "\\n" "\n" text "${text}")
  file(WRITE ${data_dir}/${name}.csv "${text}")
  mpitron_add_expect_test(train_dp_data_rejects_${name} TARGET mpitron NP 2 TIMEOUT 60
    MAX_SECONDS 30 ARGS train-dp --data ${data_dir}/${name}.csv --features 2 ${data_logs}
    EXPECT_EXIT 2
    EXPECT_OUTPUT "rank 0: error: [^\n]*${name}.csv${message}" "rank 1: error: [^\n]*${name}.csv"
    REJECT_OUTPUT "epoch")
endforeach()

# A byte-order mark and no header (--header no: no warning either): 4 samples, all trained on.
string(ASCII 239 187 191 byte_order_mark)
file(WRITE ${data_dir}/bom.csv "${byte_order_mark}1.0,2,3\n4,5,6\n7,8,9\n1,1,1\n")
mpitron_add_expect_test(train_dp_data_bom TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
  ARGS train-dp --data ${data_dir}/bom.csv --header no --features 2 --epochs 1 ${data_logs}
  EXPECT_EXIT 0 EXPECT_OUTPUT "4 samples x 2 features" REJECT_OUTPUT "error|warning")

# A numeric header ("0,1,2", pandas' unnamed columns): auto trains on it and warns once (rank 0);
# --header yes skips it.
file(WRITE ${data_dir}/numeric_header.csv "0,1,2\n1,2,3\n4,5,6\n7,8,9\n1,1,1\n")
mpitron_add_expect_test(train_dp_data_numeric_header_warns TARGET mpitron NP 2 TIMEOUT 60
  MAX_SECONDS 30 ARGS train-dp --data ${data_dir}/numeric_header.csv --features 2 --epochs 1
                      ${data_logs}
  EXPECT_EXIT 0
  EXPECT_OUTPUT "\\[rank 0\\] warning: [^\n]*numeric_header.csv: the first row is all numbers and was taken as a sample \\(--header auto\\); pass --header yes"
                "5 samples x 2 features"
  REJECT_OUTPUT "\\[rank 1\\] warning")
mpitron_add_expect_test(train_dp_data_header_yes TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
  ARGS train-dp --data ${data_dir}/numeric_header.csv --header yes --features 2 --epochs 1
       ${data_logs}
  EXPECT_EXIT 0 EXPECT_OUTPUT "4 samples x 2 features" REJECT_OUTPUT "warning")
mpitron_add_expect_test(train_dp_data_header_bad TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
  ARGS train-dp --data ${data_dir}/numeric_header.csv --header maybe ${data_logs}
  EXPECT_EXIT 2 EXPECT_OUTPUT "rank 1: error: --header: maybe not in \\{auto,yes,no\\}")

# The banner states what each rank really reads: 10 samples on 4 ranks with batches of 32 are 3
# samples per rank (2 of them repeats), in one step of 3, not 32.
mpitron_add_expect_test(train_dp_data_banner_padded TARGET mpitron NP 4 TIMEOUT 60 MAX_SECONDS 30
  ARGS train-dp --samples 10 --epochs 1 ${data_logs}
  EXPECT_EXIT 0
  EXPECT_OUTPUT "each rank reads 3 samples per epoch \\(2 repeated to even out the ranks\\) in 1 step of 3 samples\n")
mpitron_add_expect_test(train_dp_data_banner_steps TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
  ARGS train-dp --samples 11 --drop-last --batch-size 2 --epochs 1 ${data_logs}
  EXPECT_EXIT 0
  EXPECT_OUTPUT "each rank reads 5 samples per epoch \\(1 dropped by --drop-last\\) in 3 steps of 2 samples, the last of 1\n")

# Test-only faults go through nn::Fault, with the same check of the name as validate's.
mpitron_add_expect_test(train_dp_unknown_fault TARGET mpitron NP 2 TIMEOUT 60 MAX_SECONDS 30
  ARGS train-dp --inject-fault drift ${data_logs}
  EXPECT_EXIT 2 EXPECT_OUTPUT "rank 1: error: unknown fault 'drift'")
