// SPDX-License-Identifier: MIT
// pmr::allocate and the shared mappings behind it.
#include "base/error.hpp"
#include "base/shared_memory.hpp"

#include <pmr/memory.hpp>

#include <cerrno>
#include <cstdint>
#include <fcntl.h>
#include <map>
#include <mutex>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace pmr::detail {

std::size_t page_size() noexcept {
    static const auto size = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    return size;
}

std::size_t round_up_to_page(std::size_t bytes) noexcept {
    const std::size_t page = page_size();
    return (bytes + page - 1) / page * page;
}

SharedMapping SharedMapping::create(std::size_t bytes, const char* where) {
    SharedMapping m;
    m.fd_ = memfd_create("pmr", MFD_CLOEXEC);
    if (m.fd_ < 0) {
        raise_system("memfd_create", errno, where);
    }
    m.mapped_ = round_up_to_page(bytes == 0 ? 1 : bytes);
    if (ftruncate(m.fd_, static_cast<off_t>(m.mapped_)) != 0) {
        raise_system("ftruncate", errno, where, "Is /dev/shm or memory exhausted?");
    }
    m.base_ = mmap(nullptr, m.mapped_, PROT_READ | PROT_WRITE, MAP_SHARED, m.fd_, 0);
    if (m.base_ == MAP_FAILED) {
        m.base_ = nullptr;
        raise_system("mmap", errno, where);
    }
    m.data_ = static_cast<std::byte*>(m.base_);
    m.size_ = bytes;
    return m;
}

SharedMapping SharedMapping::open(pid_t pid, int fd, std::size_t offset, std::size_t bytes,
                                  const char* where) {
    SharedMapping m;
    const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
    int local = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (local < 0 && (errno == ENOENT || errno == ESRCH)) {
        raise<PeerLost>("the peer's shared memory is gone", where,
                        "The peer process exited, or destroyed its window before the first use.");
    }
    if (local < 0) {
        raise_system("open of the peer's shared memory", errno, where,
                     "The peer process must be alive, run as the same user, and /proc must be "
                     "mounted; set PMR_PROVIDER to another provider otherwise.");
    }
    // A description that names more than the file holds would map pages that fault (SIGBUS) on
    // the first copy: check the size first.
    struct stat status {};
    if (fstat(local, &status) != 0 || status.st_size < 0 ||
        offset > static_cast<std::size_t>(status.st_size) ||
        bytes > static_cast<std::size_t>(status.st_size) - offset) {
        ::close(local);
        raise<ProviderError>("the peer's shared memory is smaller than its description says (" +
                                 std::to_string(offset) + " + " + std::to_string(bytes) +
                                 " B of a file of " + std::to_string(status.st_size) + " B)",
                             where, "Are both sides running the same pmr version?");
    }
    const std::size_t page = page_size();
    const std::size_t start = offset / page * page;
    m.mapped_ = round_up_to_page(offset + (bytes == 0 ? 1 : bytes)) - start;
    m.base_ = mmap(nullptr, m.mapped_, PROT_READ | PROT_WRITE, MAP_SHARED, local,
                   static_cast<off_t>(start));
    int error = errno;
    ::close(local); // the mapping keeps the memory alive
    if (m.base_ == MAP_FAILED) {
        m.base_ = nullptr;
        raise_system("mmap of the peer's shared memory", error, where);
    }
    m.data_ = static_cast<std::byte*>(m.base_) + (offset - start);
    m.size_ = bytes;
    return m;
}

SharedMapping::SharedMapping(SharedMapping&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)), mapped_(std::exchange(other.mapped_, 0)),
      data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)),
      fd_(std::exchange(other.fd_, -1)) {}

SharedMapping& SharedMapping::operator=(SharedMapping&& other) noexcept {
    if (this != &other) {
        release();
        base_ = std::exchange(other.base_, nullptr);
        mapped_ = std::exchange(other.mapped_, 0);
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
}

SharedMapping::~SharedMapping() {
    release();
}

void SharedMapping::release() noexcept {
    if (base_ != nullptr) {
        munmap(base_, mapped_);
    }
    if (fd_ >= 0) {
        ::close(fd_);
    }
    base_ = nullptr;
    data_ = nullptr;
    fd_ = -1;
}

namespace {

// Every block handed out by pmr::allocate, by start address, and the sizes of library-owned
// window memory from provider allocators.
struct Registry {
    std::mutex mutex;
    std::map<std::uintptr_t, SharedMapping> blocks;
    std::map<std::uintptr_t, std::size_t> owned;
};

Registry& registry() {
    static auto* r = new Registry(); // never destroyed: blocks may be freed during static teardown
    return *r;
}

} // namespace

MemoryLocation locate(const void* pointer, std::size_t bytes) noexcept {
    auto address = reinterpret_cast<std::uintptr_t>(pointer);
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.blocks.upper_bound(address);
    if (it == r.blocks.begin()) {
        return {};
    }
    --it;
    const std::size_t offset = address - it->first;
    if (offset > it->second.size() || bytes > it->second.size() - offset) {
        return {};
    }
    return {it->second.fd(), offset};
}

void register_owned_block(const void* pointer, std::size_t bytes) {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.owned[reinterpret_cast<std::uintptr_t>(pointer)] = bytes;
}

void unregister_owned_block(const void* pointer) noexcept {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.owned.erase(reinterpret_cast<std::uintptr_t>(pointer));
}

} // namespace pmr::detail

namespace pmr {

void* allocate_bytes(std::size_t bytes) {
    detail::SharedMapping block;
    try {
        block = detail::SharedMapping::create(bytes, "pmr::allocate");
    } catch (const Error&) {
        throw std::bad_alloc();
    }
    void* pointer = block.data();
    auto& r = detail::registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.blocks.emplace(reinterpret_cast<std::uintptr_t>(pointer), std::move(block));
    return pointer;
}

void deallocate_bytes(void* pointer) noexcept {
    if (pointer == nullptr) {
        return;
    }
    auto& r = detail::registry();
    detail::SharedMapping block;
    {
        std::lock_guard<std::mutex> lock(r.mutex);
        auto it = r.blocks.find(reinterpret_cast<std::uintptr_t>(pointer));
        if (it == r.blocks.end()) {
            return;
        }
        block = std::move(it->second);
        r.blocks.erase(it);
    }
}

bool is_pmr_memory(const void* pointer, std::size_t bytes) noexcept {
    if (detail::locate(pointer, bytes).fd >= 0) {
        return true;
    }
    const auto address = reinterpret_cast<std::uintptr_t>(pointer);
    auto& r = detail::registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.owned.upper_bound(address);
    if (it == r.owned.begin()) {
        return false;
    }
    --it;
    const std::size_t offset = address - it->first;
    return offset <= it->second && bytes <= it->second - offset;
}

} // namespace pmr
