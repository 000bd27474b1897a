// The CSV reader of `train-dp --data`: what it accepts (header rules, BOM, quotes, CRLF) and the
// exact message of every row it rejects. One process: no MPI.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>

#include "nn/data/csv_dataset.h"

namespace mpitron::nn {
namespace {

class CsvFile : public ::testing::Test {
 protected:
  std::string write(const std::string& text) {
    std::ofstream(path_, std::ios::binary) << text;
    return path_;
  }
  // The error message read_csv_dataset throws for `text`, without the path.
  std::string error_of(const std::string& text, CsvHeader header = CsvHeader::automatic) {
    try {
      read_csv_dataset(write(text), 2, 1, header);
    } catch (const std::runtime_error& e) {
      const std::string message = e.what();
      return message.starts_with(path_) ? message.substr(path_.size()) : message;
    }
    return "no error";
  }
  void TearDown() override { std::remove(path_.c_str()); }
  std::string path_ = ::testing::TempDir() + "mpitron_csv_dataset_test.csv";
};

TEST_F(CsvFile, ReadsFeaturesThenTargetsAndSkipsHeaderAndBlankLines) {
  const CsvDataset read = read_csv_dataset(write("x1,x2,y\n1,2,3\n\n  \n-4.5, 5e-1 ,+6\n"), 2, 1);
  EXPECT_EQ(read.data.samples, 2);
  EXPECT_EQ(read.data.inputs, (std::vector<double>{1, 2, -4.5, 0.5}));
  EXPECT_EQ(read.data.outputs, (std::vector<double>{3, 6}));
  EXPECT_FALSE(read.numeric_first_row_taken_as_data);
}

TEST_F(CsvFile, AcceptsQuotedFieldsCrLfAndNoFinalNewline) {
  const CsvDataset read =
      read_csv_dataset(write("\"a\",\"b\",\"y\"\r\n\"1\",2,\" 3 \"\r\n4,5,6"), 2, 1);
  EXPECT_EQ(read.data.inputs, (std::vector<double>{1, 2, 4, 5}));
  EXPECT_EQ(read.data.outputs, (std::vector<double>{3, 6}));
}

TEST_F(CsvFile, SkipsAUtf8ByteOrderMark) {
  const CsvDataset plain = read_csv_dataset(write("\xEF\xBB\xBF"
                                                  "1.0,2,3\n"),
                                            2, 1);
  EXPECT_EQ(plain.data.inputs, (std::vector<double>{1, 2}));
  const CsvDataset headed = read_csv_dataset(write("\xEF\xBB\xBFx1,x2,y\n1,2,3\n"), 2, 1);
  EXPECT_EQ(headed.data.samples, 1);
  // Only at the very start: elsewhere the mark is part of a field.
  EXPECT_EQ(error_of("1,2,3\n\xEF\xBB\xBF"
                     "1,2,3\n"),
            ":2: the field '\xEF\xBB\xBF"
            "1' is not a number");
}

TEST_F(CsvFile, RejectsNonFiniteAndOutOfRangeFieldsWithFileAndLine) {
  EXPECT_EQ(error_of("1,2,3\n1,nan,3\n"), ":2: the field 'nan' is not a finite number");
  EXPECT_EQ(error_of("1,2,3\n1,2,inf\n"), ":2: the field 'inf' is not a finite number");
  EXPECT_EQ(error_of("1,2,3\n-Infinity,2,3\n"), ":2: the field '-Infinity' is not a finite number");
  EXPECT_EQ(error_of("x,y,z\n1,2,3\n1e39,2,3\n"),
            ":3: the field '1e39' is beyond float32's range (|value| > 3.40282e+38)");
  EXPECT_EQ(error_of("1,-3.5e38,3\n"),
            ":1: the field '-3.5e38' is beyond float32's range (|value| > 3.40282e+38)");
  EXPECT_EQ(error_of("1e999,2,3\n"), ":1: the field '1e999' is out of range");
  // float32's largest value itself is fine.
  EXPECT_EQ(read_csv_dataset(write("3.4028234e38,0,0\n"), 2, 1).data.samples, 1);
}

TEST_F(CsvFile, RejectsFieldsThatAreNotNumbers) {
  EXPECT_EQ(error_of("1,2,3\n1,?,3\n"), ":2: the field '?' is not a number");
  EXPECT_EQ(error_of("1,2,3\n1,,3\n"), ":2: the field '' is not a number");
  // A first row with a number in it is data, not a header: its bad field is an error.
  EXPECT_EQ(error_of("1.5x,2,3\n"), ":1: the field '1.5x' is not a number");
  EXPECT_EQ(error_of("1,2,3\n1,2\n"), ":2: expected 3 columns (2 features + 1 targets), got 2");
  EXPECT_EQ(error_of("1,2\"x\",3\n"),
            ":1: malformed CSV: error parsing data while strict checking enabled");
  EXPECT_EQ(error_of("1,2,\"3\n"),
            ":1: malformed CSV: error parsing data while strict checking enabled");
  EXPECT_EQ(error_of("a,b,c\n"), ": no samples");
  EXPECT_THROW(read_csv_dataset(path_ + ".missing", 2, 1), std::runtime_error);
}

TEST_F(CsvFile, HeaderAutoTakesANumericFirstRowAsDataAndSaysSo) {
  const CsvDataset read = read_csv_dataset(write("0,1,2\n4,5,6\n"), 2, 1, CsvHeader::automatic);
  EXPECT_EQ(read.data.samples, 2);
  EXPECT_TRUE(read.numeric_first_row_taken_as_data);
}

TEST_F(CsvFile, HeaderYesSkipsTheFirstRowWhateverItHolds) {
  const CsvDataset read = read_csv_dataset(write("\n0,1,2\n4,5,6\n"), 2, 1, CsvHeader::yes);
  EXPECT_EQ(read.data.samples, 1);
  EXPECT_EQ(read.data.inputs, (std::vector<double>{4, 5}));
  EXPECT_FALSE(read.numeric_first_row_taken_as_data);
}

TEST_F(CsvFile, HeaderNoTakesTheFirstRowAsASample) {
  const CsvDataset read = read_csv_dataset(write("0,1,2\n4,5,6\n"), 2, 1, CsvHeader::no);
  EXPECT_EQ(read.data.samples, 2);
  EXPECT_FALSE(read.numeric_first_row_taken_as_data);
  EXPECT_EQ(error_of("x1,x2,y\n1,2,3\n", CsvHeader::no), ":1: the field 'x1' is not a number");
}

TEST(CsvHeaderFlag, ParsesItsThreeSpellings) {
  EXPECT_EQ(parse_csv_header("auto"), CsvHeader::automatic);
  EXPECT_EQ(parse_csv_header("yes"), CsvHeader::yes);
  EXPECT_EQ(parse_csv_header("no"), CsvHeader::no);
  EXPECT_THROW(parse_csv_header("true"), std::invalid_argument);
}

}  // namespace
}  // namespace mpitron::nn
