// SPDX-License-Identifier: MIT
// pmr::allocate and the shared mappings behind it.
#include "base/error.hpp"
#include "base/shared_memory.hpp"

#include <pmr/memory.hpp>

#include "base/environment.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace pmr::detail {

std::size_t page_size() noexcept {
    static const auto size = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    return size;
}

std::size_t round_up_to_page(std::size_t bytes) noexcept {
    const std::size_t page = page_size();
    return (bytes + page - 1) / page * page;
}

namespace {

std::size_t count_lines(const char* path) noexcept {
    std::ifstream in(path);
    std::size_t lines = 0;
    std::string line;
    while (std::getline(in, line)) {
        ++lines;
    }
    return lines;
}

std::string read_word(const char* path) {
    std::ifstream in(path);
    std::string word;
    in >> word;
    return word.empty() ? "?" : word;
}

/// Throws ResourceError naming the limit behind errno value `error` of `call`, ProviderError for
/// anything else.
[[noreturn]] void raise_resource(const char* call, int error, const std::string& where) {
    if (error == EMFILE) {
        rlimit limit{};
        getrlimit(RLIMIT_NOFILE, &limit);
        raise<ResourceError>(
            std::string(call) + " failed: this process has reached its limit of " +
                std::to_string(limit.rlim_cur) + " open files (RLIMIT_NOFILE, ulimit -n)",
            where,
            "Raise the limit (ulimit -n before the run, or setrlimit up to the hard "
            "limit of " +
                std::to_string(limit.rlim_max) + ").");
    }
    if (error == ENFILE) {
        raise<ResourceError>(std::string(call) +
                                 " failed: the system's table of open files is full (fs.file-max " +
                                 read_word("/proc/sys/fs/file-max") + ")",
                             where, "Raise fs.file-max (sysctl) or run fewer processes per node.");
    }
    if (error == ENOMEM) {
        raise<ResourceError>(std::string(call) + " failed: out of memory or of mappings (" +
                                 std::to_string(count_lines("/proc/self/maps")) +
                                 " mappings, vm.max_map_count " +
                                 read_word("/proc/sys/vm/max_map_count") + ")",
                             where,
                             "Raise vm.max_map_count (sysctl) or free memory; pmr needs one "
                             "mapping per PMR_ARENA_STEP of shared memory and per peer segment.");
    }
    if (error == ENOSPC) {
        raise<ResourceError>(std::string(call) + " failed: shared memory is exhausted", where,
                             "Free memory, or raise the size of /dev/shm (tmpfs) and "
                             "kernel.shmmax/shmall.");
    }
    raise_system(call, error, where);
}

} // namespace

void require_descriptors(int count, const std::string& where) {
    std::vector<int> opened;
    int error = 0;
    for (int i = 0; i < count; ++i) {
        const int fd = fcntl(0, F_DUPFD_CLOEXEC, 0);
        if (fd < 0) {
            error = errno;
            break;
        }
        opened.push_back(fd);
    }
    for (const int fd : opened) {
        ::close(fd);
    }
    if (error == EMFILE || error == ENFILE) {
        raise_resource("reserving descriptors for UCX to map shared memory", error, where);
    }
}

SharedMapping SharedMapping::create(std::size_t bytes, const char* where) {
    SharedMapping m;
    m.fd_ = memfd_create("pmr", MFD_CLOEXEC);
    if (m.fd_ < 0) {
        raise_resource("memfd_create", errno, where);
    }
    m.mapped_ = round_up_to_page(bytes == 0 ? 1 : bytes);
    if (ftruncate(m.fd_, static_cast<off_t>(m.mapped_)) != 0) {
        raise_resource("ftruncate", errno, where);
    }
    m.base_ = mmap(nullptr, m.mapped_, PROT_READ | PROT_WRITE, MAP_SHARED, m.fd_, 0);
    if (m.base_ == MAP_FAILED) {
        m.base_ = nullptr;
        raise_resource("mmap", errno, where);
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
    if (local < 0 && (errno == EMFILE || errno == ENFILE)) {
        raise_resource("open of the peer's shared memory", errno, where);
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
        raise_resource("mmap of the peer's shared memory", error, where);
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

struct Segment {
    SharedMapping file;
    std::uint64_t id = 0;                    ///< 0: the file of one block
    std::map<std::size_t, std::size_t> free; ///< offset -> bytes, coalesced
};

struct Block {
    Segment* segment = nullptr;
    std::size_t offset = 0; ///< in the segment
    std::size_t length = 0; ///< pages taken
    std::size_t bytes = 0;  ///< asked for
    bool freed = false;     ///< freed while held for a peer
};

struct Hold {
    const std::atomic<std::uint32_t>* closed;
    pid_t pid;
};

// The arena's segments by start address, its blocks by start address, the holds on blocks, and
// the sizes of library-owned window memory from provider allocators.
struct Registry {
    std::mutex mutex;
    std::map<std::uintptr_t, std::unique_ptr<Segment>> segments;
    std::map<std::uintptr_t, Block> blocks;
    std::multimap<std::uintptr_t, Hold> holds; ///< by the start of the block held
    std::map<std::uintptr_t, std::size_t> owned;
    std::uint64_t next_segment = 1;
    std::size_t file_bytes = 0;
};

Registry& registry() {
    static auto* r = new Registry(); // never destroyed: blocks may be freed during static teardown
    return *r;
}

std::uintptr_t address_of(const void* pointer) noexcept {
    return reinterpret_cast<std::uintptr_t>(pointer);
}

// Blocks up to this size are zeroed where they are rather than given back to the system: a hole
// punched in a shared file unmaps its pages in every process that maps them, with a TLB
// shootdown on every core (about 15 us a window on 2 cores, measured), where zeroing a few pages
// costs well under a microsecond and the next window reuses them.
constexpr std::size_t zeroed_in_place = std::size_t{64} * 1024;

// Gives the pages back to the system (they read as zeros again; small blocks are zeroed in place)
// and the space to the segment; a block with a file of its own closes it. Called with the mutex
// held.
void release_block(Registry& r, std::map<std::uintptr_t, Block>::iterator it) noexcept {
    Block block = it->second;
    r.blocks.erase(it);
    Segment& segment = *block.segment;
    if (segment.id == 0) {
        r.file_bytes -= segment.file.size();
        r.segments.erase(address_of(segment.file.data()));
        return;
    }
    if (block.length <= zeroed_in_place) {
        // Only the pages the block's bytes reach: those beyond were never handed out for
        // writing and are still zero (every block was zero when cut), and leaving them alone
        // keeps them unallocated.
        std::memset(
            segment.file.data() + block.offset, 0,
            std::min(block.length, round_up_to_page(std::max<std::size_t>(block.bytes, 1))));
    } else if (fallocate(segment.file.fd(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                         static_cast<off_t>(block.offset), static_cast<off_t>(block.length)) != 0) {
        std::memset(segment.file.data() + block.offset, 0, block.length);
    }
    auto next = segment.free.emplace(block.offset, block.length).first;
    if (next != segment.free.begin()) {
        auto previous = std::prev(next);
        if (previous->first + previous->second == next->first) {
            previous->second += next->second;
            segment.free.erase(next);
            next = previous;
        }
    }
    auto after = std::next(next);
    if (after != segment.free.end() && next->first + next->second == after->first) {
        next->second += after->second;
        segment.free.erase(after);
    }
}

bool process_gone(pid_t pid) noexcept {
    return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
}

// The answer to `ask(key)`, asked once per pass of settle_holds() and key.
template <class Key, class Ask>
bool asked_once(std::vector<std::pair<Key, bool>>& answers, Key key, Ask ask) {
    for (const auto& [known, answer] : answers) {
        if (known == key) {
            return answer;
        }
    }
    answers.emplace_back(key, ask(key));
    return answers.back().second;
}

// Ends the holds whose peer has closed or exited, and releases the blocks freed meanwhile.
void settle_holds(Registry& r) noexcept {
    if (r.holds.empty()) {
        return;
    }
    std::vector<std::uintptr_t> settled;
    std::vector<std::pair<pid_t, bool>> gone;
    // Each close word is read once per pass: a receive window holds its buffer and its control
    // block on the one word in the control block, and reading it twice could see the sender's
    // close between the reads, release the control block alone (its pages read as zeros again)
    // and keep the buffer held for as long as the sender lives.
    std::vector<std::pair<const std::atomic<std::uint32_t>*, bool>> closed;
    const auto read_word = [](const std::atomic<std::uint32_t>* word) {
        return word->load(std::memory_order_acquire) != 0;
    };
    for (auto it = r.holds.begin(); it != r.holds.end();) {
        if (asked_once(closed, it->second.closed, read_word) ||
            asked_once(gone, it->second.pid, process_gone)) {
            settled.push_back(it->first);
            it = r.holds.erase(it);
        } else {
            ++it;
        }
    }
    // The flags may lie in blocks released here: all were read above.
    for (const std::uintptr_t start : settled) {
        auto it = r.blocks.find(start);
        if (it != r.blocks.end() && it->second.freed && r.holds.count(start) == 0) {
            release_block(r, it);
        }
    }
}

void check_limit(const Registry& r, std::size_t more, std::size_t bytes, const std::string& where) {
    const std::size_t limit = settings().arena_limit;
    if (limit > 0 && r.file_bytes + more > limit) {
        raise<ResourceError>("the shared-memory arena is full: " + std::to_string(bytes) +
                                 " B asked, " + std::to_string(r.file_bytes) + " B of " +
                                 std::to_string(limit) + " B (PMR_ARENA_LIMIT) taken",
                             where,
                             "Raise PMR_ARENA_LIMIT (or unset it), or free windows and "
                             "pmr::allocate memory first.");
    }
}

Segment& new_segment(Registry& r, std::size_t bytes, std::uint64_t id, const std::string& where) {
    auto segment = std::make_unique<Segment>();
    segment->file = SharedMapping::create(bytes, where.c_str());
    segment->id = id;
    Segment& s = *segment;
    r.segments.emplace(address_of(s.file.data()), std::move(segment));
    r.file_bytes += s.file.size();
    return s;
}

// First fit in the arena's segments, else in a new one.
std::byte* cut(Registry& r, std::size_t length, std::size_t bytes, const std::string& where) {
    for (auto& [start, segment] : r.segments) {
        if (segment->id == 0) {
            continue;
        }
        for (auto it = segment->free.begin(); it != segment->free.end(); ++it) {
            if (it->second >= length) {
                const std::size_t offset = it->first;
                if (it->second > length) {
                    segment->free.emplace(offset + length, it->second - length);
                }
                segment->free.erase(it);
                std::byte* data = segment->file.data() + offset;
                r.blocks.emplace(address_of(data), Block{segment.get(), offset, length, bytes});
                return data;
            }
        }
    }
    const std::size_t step = std::max(round_up_to_page(settings().arena_step), length);
    check_limit(r, step, bytes, where);
    Segment& segment = new_segment(r, step, r.next_segment, where);
    ++r.next_segment;
    if (step > length) {
        segment.free.emplace(length, step - length);
    }
    r.blocks.emplace(address_of(segment.file.data()), Block{&segment, 0, length, bytes});
    return segment.file.data();
}

const Block* block_at(const Registry& r, std::uintptr_t address) noexcept {
    auto it = r.blocks.upper_bound(address);
    if (it == r.blocks.begin()) {
        return nullptr;
    }
    --it;
    if (it->second.freed || address - it->first > it->second.bytes) {
        return nullptr;
    }
    return &it->second;
}

} // namespace

std::byte* allocate_shared(std::size_t bytes, const std::string& where) {
    const std::size_t length = round_up_to_page(std::max<std::size_t>(bytes, 1));
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    settle_holds(r);
    if (length > round_up_to_page(settings().arena_step) / 4) {
        check_limit(r, length, bytes, where);
        Segment& segment = new_segment(r, length, 0, where);
        r.blocks.emplace(address_of(segment.file.data()), Block{&segment, 0, length, bytes});
        return segment.file.data();
    }
    return cut(r, length, bytes, where);
}

void free_shared(void* pointer) noexcept {
    if (pointer == nullptr) {
        return;
    }
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.blocks.find(address_of(pointer));
    if (it == r.blocks.end() || it->second.freed) {
        return;
    }
    if (r.holds.count(it->first) != 0) {
        it->second.freed = true; // released by settle_holds() once the peer is done
        return;
    }
    release_block(r, it);
}

void hold_shared(const void* pointer, const std::atomic<std::uint32_t>* closed, pid_t pid) {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.blocks.upper_bound(address_of(pointer));
    if (it == r.blocks.begin()) {
        return;
    }
    --it;
    if (!it->second.freed && address_of(pointer) - it->first < it->second.length) {
        r.holds.emplace(it->first, Hold{closed, pid});
    }
}

ArenaUsage arena_usage() noexcept {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    settle_holds(r);
    ArenaUsage usage;
    usage.segments = r.segments.size();
    usage.file_bytes = r.file_bytes;
    usage.blocks = r.blocks.size();
    for (const auto& [start, block] : r.blocks) {
        usage.block_bytes += block.length;
    }
    usage.held = r.holds.size();
    return usage;
}

MemoryLocation locate(const void* pointer, std::size_t bytes) noexcept {
    const std::uintptr_t address = address_of(pointer);
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    const Block* block = block_at(r, address);
    if (block == nullptr) {
        return {};
    }
    const std::size_t offset = address - address_of(block->segment->file.data());
    if (bytes > block->bytes - (offset - block->offset)) {
        return {};
    }
    return {block->segment->file.fd(), offset, block->segment->id, block->segment->file.size()};
}

void register_owned_block(const void* pointer, std::size_t bytes) {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.owned[address_of(pointer)] = bytes;
}

void unregister_owned_block(const void* pointer) noexcept {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.owned.erase(address_of(pointer));
}

// -------------------------------------------------------------------------------------------------
// Peer memory
// -------------------------------------------------------------------------------------------------

std::byte* PeerMemory::address(const MemoryLocation& location, std::size_t bytes,
                               const char* where) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = segments_.find(location.segment);
    if (it == segments_.end()) {
        it = segments_
                 .emplace(location.segment,
                          SharedMapping::open(pid_, location.fd, 0, location.file_bytes, where))
                 .first;
    }
    const SharedMapping& mapping = it->second;
    if (location.offset > mapping.size() || bytes > mapping.size() - location.offset) {
        raise<ProviderError>("the peer describes shared memory beyond its segment (" +
                                 std::to_string(location.offset) + " + " + std::to_string(bytes) +
                                 " B of " + std::to_string(mapping.size()) + " B)",
                             where, "Are both sides running the same pmr version?");
    }
    return mapping.data() + location.offset;
}

std::size_t PeerMemory::mapped() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return segments_.size();
}

namespace {

// When process `pid` started (clock ticks after boot), so that a new process with a reused pid
// gets new mappings; 0 if unknown.
std::uint64_t start_time(pid_t pid) {
    // Read with plain system calls into a buffer on the stack: a connection to a process on this
    // node asks once, and a stream with its locale cost several times the read itself.
    char path[32];
    std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    char text[1024];
    std::size_t length = 0;
    while (length + 1 < sizeof text) {
        const ssize_t got = ::read(fd, text + length, sizeof text - 1 - length);
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got <= 0) {
            break;
        }
        length += static_cast<std::size_t>(got);
    }
    ::close(fd);
    text[length] = '\0';
    // The name (field 2) may hold spaces and parentheses: the fields after it start at the last
    // ')'.
    const char* end_of_name = std::strrchr(text, ')');
    if (end_of_name == nullptr) {
        return 0;
    }
    // Fields after the name: state is field 3, start time field 22. `position` is the space
    // before field 3; each step moves it to the space before the next field.
    const char* position = end_of_name + 1;
    for (int field = 3; field < 22; ++field) {
        position = std::strchr(position + 1, ' ');
        if (position == nullptr) {
            return 0;
        }
    }
    return std::strtoull(position + 1, nullptr, 10);
}

} // namespace

std::shared_ptr<PeerMemory> peer_memory(pid_t pid) {
    static std::mutex mutex;
    static auto* peers = new std::map<std::pair<pid_t, std::uint64_t>, std::weak_ptr<PeerMemory>>();
    const std::pair<pid_t, std::uint64_t> key{pid, start_time(pid)};
    std::lock_guard<std::mutex> lock(mutex);
    for (auto it = peers->begin(); it != peers->end();) {
        it = it->second.expired() ? peers->erase(it) : std::next(it);
    }
    std::weak_ptr<PeerMemory>& slot = (*peers)[key];
    std::shared_ptr<PeerMemory> memory = slot.lock();
    if (!memory) {
        memory = std::make_shared<PeerMemory>(pid);
        slot = memory;
    }
    return memory;
}

} // namespace pmr::detail

namespace pmr {

void* allocate_bytes(std::size_t bytes) {
    try {
        return detail::allocate_shared(bytes, "pmr::allocate");
    } catch (const Error&) {
        throw std::bad_alloc();
    }
}

void deallocate_bytes(void* pointer) noexcept {
    detail::free_shared(pointer);
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
