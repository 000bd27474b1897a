// Size-bucketed free lists, one pool per (device, host) pair.
#include "kernels/allocator.h"

#include <array>
#include <mutex>
#include <new>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "kernels/backend.h"

namespace mpitron::kernels {
namespace {

constexpr std::size_t kGranularity = 512;

std::size_t bucket_of(std::size_t bytes) {
  return (bytes + kGranularity - 1) / kGranularity * kGranularity;
}

class Pool {
 public:
  void* allocate(Backend& backend, bool host, std::size_t bucket) {
    std::lock_guard lock(mutex_);
    auto it = free_.find(bucket);
    if (it != free_.end() && !it->second.empty()) {
      void* ptr = it->second.back();
      it->second.pop_back();
      return ptr;
    }
    void* ptr = raw_allocate(backend, host, bucket);
    if (ptr == nullptr) {
      release_all(backend, host);
      ptr = raw_allocate(backend, host, bucket);
    }
    return ptr;
  }

  void deallocate(Backend& backend, bool host, void* ptr, std::size_t bucket) noexcept {
    std::lock_guard lock(mutex_);
    try {
      free_[bucket].push_back(ptr);
    } catch (const std::bad_alloc&) {
      raw_deallocate(backend, host, ptr);  // no room for the free list: give the block back
    }
  }

 private:
  static void* raw_allocate(Backend& backend, bool host, std::size_t bytes) {
    return host ? backend.allocate_host(bytes) : backend.allocate(bytes);
  }

  static void raw_deallocate(Backend& backend, bool host, void* ptr) noexcept {
    if (host) {
      backend.deallocate_host(ptr);
    } else {
      backend.deallocate(ptr);
    }
  }

  void release_all(Backend& backend, bool host) {
    for (auto& [bucket, blocks] : free_) {
      for (void* ptr : blocks)
        raw_deallocate(backend, host, ptr);
    }
    free_.clear();
  }

  std::mutex mutex_;
  std::unordered_map<std::size_t, std::vector<void*>> free_;
};

// Never destroyed: buffers with static storage duration may be freed after main returns.
Pool& pool(Device device, bool host) {
  static auto* pools = new std::array<Pool, 4>();
  return (*pools)[static_cast<std::size_t>(device) * 2 + (host ? 1 : 0)];
}

}  // namespace

void* cached_allocate(Device device, bool host, std::size_t bytes) {
  void* ptr = pool(device, host).allocate(backend(device), host, bucket_of(bytes));
  if (ptr == nullptr) {
    throw std::runtime_error("kernels: cannot allocate " + std::to_string(bytes) + " bytes of " +
                             (host ? "host memory for " : "memory on ") + to_string(device));
  }
  return ptr;
}

void cached_deallocate(Device device, bool host, void* ptr, std::size_t bytes) noexcept {
  // backend(device) cannot throw here: a block of `device` exists, so its backend does.
  pool(device, host).deallocate(backend(device), host, ptr, bucket_of(bytes));
}

}  // namespace mpitron::kernels
