// Reading a regression dataset from a CSV file (RFC 4180 tokenizing by libcsv; the number rules
// are ours), strict enough that training never starts on garbage.
#pragma once

#include <cstdint>
#include <string>

#include "nn/data/dataset.h"

namespace mpitron::nn {

/// Whether the first non-blank row of a CSV file is a header.
enum class CsvHeader {
  /// A header when none of its fields is a number (e.g. "x1,x2,y"); otherwise data.
  automatic,
  /// Always a header, skipped whatever it holds (e.g. "0,1,2", as pandas writes unnamed columns).
  yes,
  /// Never a header: the first row is a sample.
  no,
};

/// CsvHeader from its flag spelling "auto", "yes" or "no"; throws std::invalid_argument otherwise.
CsvHeader parse_csv_header(const std::string& text);

/// A dataset read from CSV, and what the reader decided on the way.
struct CsvDataset {
  Dataset data;
  /// CsvHeader::automatic found a first row made only of numbers and took it as a sample: a
  /// numeric header would have been trained on, so callers should say so (or pass yes/no).
  bool numeric_first_row_taken_as_data = false;
};

/// The largest magnitude a field may have: float32's largest finite value, since training runs
/// in float32 (a bigger value would become inf there).
inline constexpr double kMaxCsvMagnitude = 3.4028234663852886e38;

/// Reads a CSV file of numbers, one sample per row: `features` input columns then `targets`
/// output columns. A UTF-8 byte-order mark at the start is skipped, blank lines are skipped,
/// fields may be quoted and padded with spaces, and the first non-blank row is a header or not per
/// `header`. Throws std::runtime_error "<path>:<line>: <what>" for the first bad row, before
/// any sample is used: a field that is not a number ("the field '?' is not a number"), not finite
/// ("the field 'nan' is not a finite number"), beyond float32's range ("the field '1e39' is
/// beyond float32's range (|value| > 3.40282e+38)"), a row with another column count ("expected
/// 3 columns (2 features + 1 targets), got 2") or malformed CSV (libcsv's message); and
/// "<path>: no samples" or "cannot open data file <path>".
CsvDataset read_csv_dataset(const std::string& path, std::int64_t features, std::int64_t targets,
                            CsvHeader header = CsvHeader::automatic);

}  // namespace mpitron::nn
