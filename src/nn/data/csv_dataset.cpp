#include "nn/data/csv_dataset.h"

#include <csv.h>
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace mpitron::nn {

CsvHeader parse_csv_header(const std::string& text) {
  if (text == "auto") return CsvHeader::automatic;
  if (text == "yes") return CsvHeader::yes;
  if (text == "no") return CsvHeader::no;
  throw std::invalid_argument("--header must be auto, yes or no, not '" + text + "'");
}

namespace {

constexpr std::string_view kUtf8ByteOrderMark = "\xEF\xBB\xBF";

std::string_view trimmed(std::string_view text) {
  const std::size_t first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

// A field's number, or what is wrong with it (`numeric`: it is written as a number at all, even
// a non-finite or out-of-range one, which is what tells a header row from a data row).
struct Number {
  double value = 0.0;
  bool numeric = false;
  std::string error;  // empty when the value can be trained on
};

Number parse_number(std::string_view field) {
  const std::string_view text = trimmed(field);
  const char* first = text.data();
  const char* last = first + text.size();
  if (text.size() > 1 && text[0] == '+' && text[1] != '-') ++first;  // from_chars takes no '+'
  Number number;
  const auto [end, status] = std::from_chars(first, last, number.value);
  number.numeric = !text.empty() && end == last &&
                   (status == std::errc() || status == std::errc::result_out_of_range);
  if (!number.numeric) {
    number.error = fmt::format("the field '{}' is not a number", field);
  } else if (status == std::errc::result_out_of_range) {
    number.error = fmt::format("the field '{}' is out of range", field);
  } else if (!std::isfinite(number.value)) {
    number.error = fmt::format("the field '{}' is not a finite number", field);
  } else if (std::abs(number.value) > kMaxCsvMagnitude) {
    number.error = fmt::format("the field '{}' is beyond float32's range (|value| > {:g})", field,
                               kMaxCsvMagnitude);
  }
  return number;
}

// Collects libcsv's fields row by row and turns each row into a sample (or the first error).
class RowReader {
 public:
  RowReader(const std::string& path, std::int64_t features, std::int64_t targets, CsvHeader header)
      : path_(path), features_(features), targets_(targets), header_(header) {
    result_.data = Dataset{0, features, targets, {}, {}};
  }

  static void on_field(void* text, std::size_t length, void* self) {
    static_cast<RowReader*>(self)->fields_.emplace_back(static_cast<const char*>(text), length);
  }
  static void on_row_end(int, void* self) { static_cast<RowReader*>(self)->end_row(); }

  void set_line(int line) { line_ = line; }
  void fail(const std::string& what) {
    if (error_.empty()) error_ = fmt::format("{}:{}: {}", path_, line_, what);
  }
  const std::string& error() const { return error_; }
  CsvDataset& result() { return result_; }

 private:
  void end_row() {
    std::vector<std::string> fields;
    fields.swap(fields_);
    if (!error_.empty() || (fields.size() == 1 && trimmed(fields[0]).empty())) return;
    const bool first = first_row_;
    first_row_ = false;
    std::vector<Number> numbers;
    for (const std::string& field : fields)
      numbers.push_back(parse_number(field));
    std::size_t numeric = 0;
    for (const Number& n : numbers)
      numeric += n.numeric ? 1 : 0;
    if (first && (header_ == CsvHeader::yes || (header_ == CsvHeader::automatic && numeric == 0)))
      return;
    if (first && header_ == CsvHeader::automatic && numeric == numbers.size()) {
      result_.numeric_first_row_taken_as_data = true;
    }
    for (const Number& n : numbers) {
      if (!n.error.empty()) return fail(n.error);
    }
    const auto columns = static_cast<std::size_t>(features_ + targets_);
    if (numbers.size() != columns) {
      return fail(fmt::format("expected {} columns ({} features + {} targets), got {}", columns,
                              features_, targets_, numbers.size()));
    }
    Dataset& data = result_.data;
    for (std::size_t c = 0; c < columns; ++c)
      (c < static_cast<std::size_t>(features_) ? data.inputs : data.outputs)
          .push_back(numbers[c].value);
    ++data.samples;
  }

  std::string path_;
  std::int64_t features_, targets_;
  CsvHeader header_;
  CsvDataset result_;
  std::vector<std::string> fields_;
  bool first_row_ = true;
  int line_ = 0;
  std::string error_;
};

// libcsv's parser state, freed on every path.
class Parser {
 public:
  Parser() {
    if (csv_init(&parser_, CSV_STRICT | CSV_STRICT_FINI) != 0) throw std::bad_alloc();
  }
  ~Parser() { csv_free(&parser_); }
  Parser(const Parser&) = delete;
  Parser& operator=(const Parser&) = delete;

  // Feeds `text`; false when libcsv rejects it.
  bool feed(std::string_view text, RowReader& rows) {
    return csv_parse(&parser_, text.data(), text.size(), RowReader::on_field, RowReader::on_row_end,
                     &rows) == text.size();
  }
  bool finish(RowReader& rows) {
    return csv_fini(&parser_, RowReader::on_field, RowReader::on_row_end, &rows) == 0;
  }
  std::string error() { return csv_strerror(csv_error(&parser_)); }

 private:
  csv_parser parser_{};
};

}  // namespace

CsvDataset read_csv_dataset(const std::string& path, std::int64_t features, std::int64_t targets,
                            CsvHeader header) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw std::runtime_error(fmt::format("cannot open data file {}", path));
  RowReader rows(path, features, targets, header);
  Parser parser;
  std::string line;
  int number = 0;
  while (rows.error().empty() && std::getline(file, line)) {
    rows.set_line(++number);
    std::string_view text = line;
    if (number == 1 && text.starts_with(kUtf8ByteOrderMark)) text.remove_prefix(3);
    if (!parser.feed(text, rows) || !parser.feed("\n", rows)) {
      rows.fail("malformed CSV: " + parser.error());
    }
  }
  if (rows.error().empty() && !parser.finish(rows)) {
    rows.fail("malformed CSV: " + parser.error());
  }
  if (!rows.error().empty()) throw std::runtime_error(rows.error());
  if (rows.result().data.samples == 0)
    throw std::runtime_error(fmt::format("{}: no samples", path));
  return rows.result();
}

}  // namespace mpitron::nn
