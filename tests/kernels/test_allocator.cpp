// The caching allocator (kernels/allocator.h): size classes, reuse across nearby sizes, the limit
// on cached bytes (oldest released first), release on request and on allocation failure. The pools
// are process-wide, so checks compare counters before and after.
#include <gtest/gtest.h>

#include <cstddef>
#include <stdexcept>

#include "kernels/allocator.h"

namespace mpitron::kernels {
namespace {

TEST(Allocator, ClassesAre512ByteStepsThenFourPerPowerOfTwoThen1MiBSteps) {
  EXPECT_EQ(allocation_class(1), 512u);
  EXPECT_EQ(allocation_class(512), 512u);
  EXPECT_EQ(allocation_class(513), 1024u);
  EXPECT_EQ(allocation_class(4096), 4096u);
  EXPECT_EQ(allocation_class(4097), 5120u);
  EXPECT_EQ(allocation_class(8192), 8192u);
  EXPECT_EQ(allocation_class(8193), 10240u);
  EXPECT_EQ(allocation_class(std::size_t{3} << 20), std::size_t{3} << 20);
  EXPECT_EQ(allocation_class((std::size_t{3} << 20) + 1), std::size_t{7} << 19);  // 3.5 MiB
  EXPECT_EQ(allocation_class((std::size_t{4} << 20) + 1), std::size_t{5} << 20);
  EXPECT_EQ(allocation_class((std::size_t{32} << 20) + 1), std::size_t{33} << 20);
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  std::size_t previous = 0;
  for (std::size_t bytes = 1; bytes < (std::size_t{1} << 30); bytes = bytes * 9 / 8 + 1) {
    const std::size_t size = allocation_class(bytes);
    EXPECT_GE(size, bytes);
    EXPECT_LE(size, bytes + bytes / 4 + 511) << bytes;  // at most 25 % (or 511 bytes) more
    EXPECT_LT(size, bytes + kMiB) << bytes;             // and less than 1 MiB more
    EXPECT_GE(size, previous) << bytes;                 // monotone
    EXPECT_EQ(allocation_class(size), size) << bytes;   // a class serves itself
    previous = size;
  }
  EXPECT_THROW(allocation_class(static_cast<std::size_t>(-1)), std::length_error);
}

TEST(Allocator, NearbySizesReuseOneBlock) {
  void* first = cached_allocate(Device::cpu, false, 5000);
  cached_deallocate(Device::cpu, false, first, 5000);
  const AllocatorStats before = allocator_stats(Device::cpu);
  void* second = cached_allocate(Device::cpu, false, 4500);  // same 5 KiB class
  const AllocatorStats after = allocator_stats(Device::cpu);
  EXPECT_EQ(second, first);
  EXPECT_EQ(after.backend_allocations, before.backend_allocations);
  EXPECT_EQ(after.requests, before.requests + 1);
  EXPECT_EQ(after.in_use_bytes, before.in_use_bytes + 5120);
  EXPECT_EQ(after.cached_bytes, before.cached_bytes - 5120);
  cached_deallocate(Device::cpu, false, second, 4500);
}

TEST(Allocator, LimitReleasesTheOldestCachedBlocks) {
  const std::size_t saved = allocator_cache_limit();
  set_allocator_cache_limit(0);
  constexpr std::size_t kBlock = std::size_t{96} << 10;  // a class of its own in this test
  set_allocator_cache_limit(2 * kBlock);
  void* a = cached_allocate(Device::cpu, false, kBlock);
  void* b = cached_allocate(Device::cpu, false, kBlock);
  void* c = cached_allocate(Device::cpu, false, kBlock);
  const AllocatorStats before = allocator_stats(Device::cpu);
  cached_deallocate(Device::cpu, false, a, kBlock);
  cached_deallocate(Device::cpu, false, b, kBlock);
  cached_deallocate(Device::cpu, false, c, kBlock);  // over the limit: `a` is released
  AllocatorStats after = allocator_stats(Device::cpu);
  EXPECT_EQ(after.cached_bytes, 2 * kBlock);
  EXPECT_EQ(after.backend_releases, before.backend_releases + 1);
  void* again = cached_allocate(Device::cpu, false, kBlock);
  EXPECT_EQ(again, c);  // the most recently freed block comes back first
  cached_deallocate(Device::cpu, false, again, kBlock);
  // A block larger than the whole limit is released at once.
  void* big = cached_allocate(Device::cpu, false, 3 * kBlock);
  const std::uint64_t releases = allocator_stats(Device::cpu).backend_releases;
  cached_deallocate(Device::cpu, false, big, 3 * kBlock);
  after = allocator_stats(Device::cpu);
  EXPECT_EQ(after.backend_releases, releases + 1);
  EXPECT_LE(after.cached_bytes, 2 * kBlock);
  set_allocator_cache_limit(0);  // trims everything
  EXPECT_EQ(allocator_stats(Device::cpu).cached_bytes, 0u);
  set_allocator_cache_limit(saved);
}

TEST(Allocator, FailedAllocationReleasesTheCacheAndNamesTheSize) {
  void* block = cached_allocate(Device::cpu, false, 10000);
  cached_deallocate(Device::cpu, false, block, 10000);
  ASSERT_GT(allocator_stats(Device::cpu).cached_bytes, 0u);
  try {
    cached_allocate(Device::cpu, false, std::size_t{1} << 62);
    FAIL() << "a 4 EiB allocation succeeded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("4611686018427387904 bytes of memory on cpu"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(allocator_stats(Device::cpu).cached_bytes, 0u);
}

TEST(Allocator, ReleaseCachedBlocksEmptiesTheCacheAndKeepsBlocksInUse) {
  void* kept = cached_allocate(Device::cpu, false, 20000);
  void* freed = cached_allocate(Device::cpu, false, 30000);
  cached_deallocate(Device::cpu, false, freed, 30000);
  const AllocatorStats before = allocator_stats(Device::cpu);
  ASSERT_GT(before.cached_bytes, 0u);
  release_cached_blocks();
  const AllocatorStats after = allocator_stats(Device::cpu);
  EXPECT_EQ(after.cached_bytes, 0u);
  EXPECT_GT(after.backend_releases, before.backend_releases);
  EXPECT_EQ(after.in_use_bytes, before.in_use_bytes);
  cached_deallocate(Device::cpu, false, kept, 20000);
}

TEST(Allocator, PeaksTrackInUseAndHeldBytes) {
  const AllocatorStats before = allocator_stats(Device::cpu);
  void* block = cached_allocate(Device::cpu, false, std::size_t{1} << 20);
  const AllocatorStats during = allocator_stats(Device::cpu);
  EXPECT_GE(during.peak_in_use_bytes, before.in_use_bytes + (std::size_t{1} << 20));
  EXPECT_GE(during.peak_held_bytes, during.in_use_bytes + during.cached_bytes);
  cached_deallocate(Device::cpu, false, block, std::size_t{1} << 20);
  EXPECT_EQ(allocator_stats(Device::cpu).in_use_bytes, before.in_use_bytes);
}

TEST(Allocator, ResetPeaksRestartsThemFromTheCurrentBytes) {
  constexpr std::size_t kBig = std::size_t{3} << 20, kSmall = std::size_t{1} << 20;
  void* big = cached_allocate(Device::cpu, false, kBig);
  cached_deallocate(Device::cpu, false, big, kBig);
  reset_allocator_peaks(Device::cpu);
  AllocatorStats stats = allocator_stats(Device::cpu);
  EXPECT_EQ(stats.peak_in_use_bytes, stats.in_use_bytes);  // the 3 MiB peak is forgotten
  EXPECT_EQ(stats.peak_held_bytes, stats.in_use_bytes + stats.cached_bytes);
  void* small = cached_allocate(Device::cpu, false, kSmall);
  cached_deallocate(Device::cpu, false, small, kSmall);
  const std::size_t before = stats.in_use_bytes;
  stats = allocator_stats(Device::cpu);
  EXPECT_EQ(stats.peak_in_use_bytes, before + kSmall);
}

}  // namespace
}  // namespace mpitron::kernels
