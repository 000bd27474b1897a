// Message chunking and gather/scatter tiling, with counts above INT_MAX that are never
// allocated.
#include <gtest/gtest.h>

#include <climits>

#include "comm/chunking.h"

namespace mpitron::comm {
namespace {

constexpr std::size_t kIntMax = INT_MAX;
constexpr std::size_t kTwo31 = std::size_t{1} << 31;

TEST(SplitCount, CountsAboveIntMaxBecomeSeveralMessages) {
  EXPECT_EQ(split_count(kTwo31 + 5), (std::vector<Range>{{0, kIntMax}, {kIntMax, 6}}));
  EXPECT_EQ(split_count(kIntMax), (std::vector<Range>{{0, kIntMax}}));
  const std::size_t huge = 3 * kIntMax + 1;
  EXPECT_EQ(split_count(huge),
            (std::vector<Range>{
                {0, kIntMax}, {kIntMax, kIntMax}, {2 * kIntMax, kIntMax}, {3 * kIntMax, 1}}));
}

TEST(SplitCount, ComputedRangesNeedNoList) {
  EXPECT_EQ(message_count(kTwo31 + 5, kIntMax), 2u);
  EXPECT_EQ(message_range(kTwo31 + 5, kIntMax, 1), (Range{kIntMax, 6}));
  EXPECT_EQ(message_count(0, 3), 0u);
  EXPECT_EQ(tile_count(1000, kTwo31 + 5, kIntMax), 2000u);
  EXPECT_EQ(tile_at(1000, kTwo31 + 5, kIntMax, 1999), (Tile{999, 1, kIntMax, 6}));
  EXPECT_EQ(tile_at(kTwo31 + 5, 1, kIntMax, 1), (Tile{kIntMax, 6, 0, 1}));
}

TEST(SplitCount, SmallLimitsAndEdges) {
  EXPECT_TRUE(split_count(0).empty());
  EXPECT_EQ(split_count(10, 3), (std::vector<Range>{{0, 3}, {3, 3}, {6, 3}, {9, 1}}));
  EXPECT_EQ(split_count(9, 3), (std::vector<Range>{{0, 3}, {3, 3}, {6, 3}}));
  EXPECT_EQ(split_count(1, 1), (std::vector<Range>{{0, 1}}));
  EXPECT_THROW(split_count(5, 0), std::invalid_argument);
  EXPECT_THROW(split_count(5, kIntMax + 1), std::invalid_argument);
}

TEST(EvenChunks, TheFirstRemainderChunksAreOneLonger) {
  // 10 elements in 4 chunks: 3, 3, 2, 2.
  EXPECT_EQ(even_chunks(10, 4, 0), (Range{0, 3}));
  EXPECT_EQ(even_chunks(10, 4, 1), (Range{3, 3}));
  EXPECT_EQ(even_chunks(10, 4, 2), (Range{6, 2}));
  EXPECT_EQ(even_chunks(10, 4, 3), (Range{8, 2}));
  EXPECT_EQ(even_chunks(10, 4, 1, 2), (Range{3, 5}));
  EXPECT_EQ(even_chunks(10, 4, 0, 4), (Range{0, 10}));
  EXPECT_EQ(even_chunks(12, 4, 2, 2), (Range{6, 6}));
  EXPECT_EQ(even_chunks(3, 4, 3), (Range{3, 0}));
  EXPECT_EQ(even_chunks(kTwo31 * 4 + 1, 4, 1), (Range{kTwo31 + 1, kTwo31}));
}

TEST(TileMatrix, WholeRowsWhenARowFits) {
  EXPECT_EQ(tile_matrix(3, 4, 8), (std::vector<Tile>{{0, 2, 0, 4}, {2, 1, 0, 4}}));
  EXPECT_EQ(tile_matrix(5, 1000000), (std::vector<Tile>{{0, 5, 0, 1000000}}));
  EXPECT_EQ(tile_matrix(kTwo31 + 5, 1),
            (std::vector<Tile>{{0, kIntMax, 0, 1}, {kIntMax, 6, 0, 1}}));
  EXPECT_TRUE(tile_matrix(0, 4).empty());
  EXPECT_TRUE(tile_matrix(4, 0).empty());
}

TEST(TileMatrix, RowsAboveTheLimitAreCut) {
  EXPECT_EQ(tile_matrix(2, kTwo31 + 5),
            (std::vector<Tile>{
                {0, 1, 0, kIntMax}, {0, 1, kIntMax, 6}, {1, 1, 0, kIntMax}, {1, 1, kIntMax, 6}}));
  EXPECT_THROW(tile_matrix(2, 2, 0), std::invalid_argument);
}

TEST(TileMatrix, CoversEveryElementOnceWithContiguousTiles) {
  for (std::size_t outer = 1; outer <= 5; ++outer) {
    for (std::size_t chunk = 1; chunk <= 7; ++chunk) {
      for (std::size_t limit = 1; limit <= 12; ++limit) {
        std::vector<int> hits(outer * chunk, 0);
        for (const Tile& tile : tile_matrix(outer, chunk, limit)) {
          EXPECT_LE(tile.rows * tile.cols, limit);
          EXPECT_TRUE(tile.rows == 1 || tile.cols == chunk);  // contiguous in [outer, chunk]
          for (std::size_t i = tile.row; i < tile.row + tile.rows; ++i) {
            for (std::size_t j = tile.col; j < tile.col + tile.cols; ++j)
              ++hits[i * chunk + j];
          }
        }
        EXPECT_EQ(hits, std::vector<int>(outer * chunk, 1))
            << outer << "x" << chunk << " limit " << limit;
      }
    }
  }
}

}  // namespace
}  // namespace mpitron::comm
