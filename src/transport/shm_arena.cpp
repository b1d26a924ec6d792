#include "transport/shm_arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

namespace gpurdma::transport {

namespace {

constexpr size_t kPage = 4096;
constexpr size_t kLine = 64;
constexpr size_t kHeader = kPage;  // the file's first page: its nonce

size_t round_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

Status sys_error(const std::string &what, int err)
{
    return Status::error(GPURDMA_ERR_NO_RESOURCE, what + ": " + std::strerror(err));
}

}  // namespace

void SliceAddress::write(wire::Writer &w) const
{
    w.u32(static_cast<uint32_t>(pid));
    w.u32(static_cast<uint32_t>(fd));
    w.u64(nonce);
    w.u64(capacity);
    w.u64(offset);
    w.u64(bytes);
    w.u64(serial);
}

bool SliceAddress::read(wire::Reader &r)
{
    uint32_t p = 0, f = 0;
    if (!r.u32(&p) || !r.u32(&f) || !r.u64(&nonce) || !r.u64(&capacity) || !r.u64(&offset) || !r.u64(&bytes) ||
        !r.u64(&serial))
        return false;
    pid = static_cast<int32_t>(p);
    fd = static_cast<int32_t>(f);
    return true;
}

std::string SliceAddress::name() const
{
    char text[96];
    std::snprintf(text, sizeof text, "/gpurdma-%u-%d-%016llx-%llu", static_cast<unsigned>(getuid()), pid,
                  static_cast<unsigned long long>(nonce), static_cast<unsigned long long>(serial));
    return text;
}

ShmSlice::~ShmSlice()
{
    // Everything this rank wrote into the slice is done before the count says so.
    __atomic_sub_fetch(count_, 1, __ATOMIC_ACQ_REL);
    if (arenas_) arenas_->retire(offset_, ShmArenas::footprint(bytes_));
}

ShmArenas::~ShmArenas()
{
    for (auto &p : peers_) munmap(p.second.base, p.second.bytes);
    if (own_) munmap(own_, capacity_ + kHeader);
    if (fd_ >= 0) close(fd_);
}

size_t ShmArenas::footprint(size_t bytes)
{
    return round_up(round_up(bytes, kLine) + kLine, kPage);
}

Status ShmArenas::open_own()
{
    const int fd = memfd_create("gpurdma-arena", MFD_CLOEXEC);
    if (fd < 0) return sys_error("memfd_create", errno);
    // Private to the job's user as a segment is (a memfd starts 0777; only a process that
    // may trace ours reaches it through /proc anyway).
    (void)fchmod(fd, 0600);
    // Sparse: no page is used until a slice's user touches it.
    if (ftruncate(fd, static_cast<off_t>(capacity_ + kHeader)) != 0) {
        const int err = errno;
        close(fd);
        return sys_error("sizing the shared-memory arena to " + std::to_string(capacity_) + " bytes", err);
    }
    void *p = mmap(nullptr, capacity_ + kHeader, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        const int err = errno;
        close(fd);
        return sys_error("mmap of the shared-memory arena", err);
    }
    std::random_device rd;
    nonce_ = ((static_cast<uint64_t>(rd()) << 32) ^ rd()) | 1;  // never 0: an unwritten file's
    std::memcpy(p, &nonce_, sizeof nonce_);
    fd_ = fd;
    own_ = static_cast<char *>(p);
    high_ = kHeader;
    return Status::ok();
}

void ShmArenas::retire(size_t offset, size_t bytes)
{
    std::lock_guard<std::mutex> hold(lock_);
    retired_.push_back(Range{offset, bytes});
    in_use_ -= bytes;
}

void ShmArenas::reclaim()
{
    for (size_t i = 0; i < retired_.size();) {
        const Range r = retired_[i];
        const uint64_t *count = reinterpret_cast<const uint64_t *>(own_ + r.offset + r.bytes - kLine);
        // Acquire: whatever the last holder wrote is done before we hand the bytes out again.
        if (__atomic_load_n(count, __ATOMIC_ACQUIRE) != 0) {
            ++i;
            continue;
        }
        retired_[i] = retired_.back();
        retired_.pop_back();
        auto at = free_.emplace(r.offset, r.bytes).first;
        if (auto next = std::next(at); next != free_.end() && at->first + at->second == next->first) {
            at->second += next->second;
            free_.erase(next);
        }
        if (at != free_.begin()) {
            auto before = std::prev(at);
            if (before->first + before->second == at->first) {
                before->second += at->second;
                free_.erase(at);
            }
        }
    }
}

Status ShmArenas::take(size_t bytes, int holders, const std::vector<std::pair<size_t, size_t>> &cleared,
                       std::unique_ptr<ShmSlice> *out, SliceAddress *where)
{
    if (!enabled()) return Status::error(GPURDMA_ERR_NO_RESOURCE, "no shared-memory arena");
    const size_t need = footprint(bytes);
    std::lock_guard<std::mutex> hold(lock_);
    if (!own_) {
        const Status opened = open_own();
        if (!opened.is_ok()) return opened;
    }
    reclaim();
    size_t offset = 0;
    bool reused = false;
    for (auto it = free_.begin(); it != free_.end(); ++it) {
        if (it->second < need) continue;
        offset = it->first;
        const size_t left = it->second - need;
        free_.erase(it);
        if (left > 0) free_.emplace(offset + need, left);
        reused = true;
        break;
    }
    if (!reused) {
        if (high_ + need > capacity_ + kHeader)
            return Status::unsupported("the shared-memory arena is full (" + std::to_string(in_use_ >> 20) +
                                       " MiB of " + std::to_string(capacity_ >> 20) +
                                       " MiB held by this process's communicators; coll_gpurdma_shm_arena_size)");
        offset = high_;
        high_ += need;
    }
    char *base = own_ + offset;
    // Fresh pages are zero already: touching them would only use memory.
    if (reused)
        for (const auto &c : cleared)
            if (c.first < bytes) std::memset(base + c.first, 0, std::min(c.second, bytes - c.first));
    auto *count = reinterpret_cast<uint64_t *>(base + need - kLine);
    __atomic_store_n(count, static_cast<uint64_t>(holders), __ATOMIC_RELEASE);
    in_use_ += need;
    where->pid = static_cast<int32_t>(getpid());
    where->fd = fd_;
    where->nonce = nonce_;
    where->capacity = capacity_ + kHeader;
    where->offset = offset;
    where->bytes = bytes;
    where->serial = ++serial_;
    out->reset(new ShmSlice(this, base, bytes, count, offset, where->name()));
    return Status::ok();
}

Status ShmArenas::attach(const SliceAddress &where, std::unique_ptr<ShmSlice> *out)
{
    const std::string which = "the shared-memory arena of process " + std::to_string(where.pid);
    if (where.capacity < kHeader || where.offset < kHeader || where.bytes == 0 ||
        where.offset + footprint(where.bytes) > where.capacity)
        return Status::error(GPURDMA_ERR_NO_RESOURCE, which + ": a slice outside it");
    std::lock_guard<std::mutex> hold(lock_);
    auto known = peers_.find({where.pid, where.nonce});
    if (known == peers_.end()) {
        const std::string path = "/proc/" + std::to_string(where.pid) + "/fd/" + std::to_string(where.fd);
        const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
        if (fd < 0)
            return sys_error(which + " (" + path +
                                 "; ranks of a node must see each other's processes, else set "
                                 "coll_gpurdma_shm_arena_size 0)",
                             errno);
        struct stat st {};
        if (fstat(fd, &st) != 0 || st.st_uid != getuid() || (st.st_mode & 077) != 0 ||
            static_cast<uint64_t>(st.st_size) != where.capacity) {
            close(fd);
            return Status::error(GPURDMA_ERR_NO_RESOURCE, which + " has another owner, mode or size");
        }
        void *p = mmap(nullptr, where.capacity, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        const int err = errno;
        close(fd);
        if (p == MAP_FAILED) return sys_error("mmap of " + which, err);
        uint64_t nonce = 0;
        std::memcpy(&nonce, p, sizeof nonce);
        if (nonce != where.nonce) {
            munmap(p, where.capacity);
            return Status::error(GPURDMA_ERR_NO_RESOURCE, which + " is not the file it named (another process's)");
        }
        known = peers_.emplace(std::make_pair(where.pid, where.nonce), Mapping{static_cast<char *>(p), where.capacity})
                    .first;
    }
    char *base = known->second.base + where.offset;
    auto *count = reinterpret_cast<uint64_t *>(base + footprint(where.bytes) - kLine);
    out->reset(new ShmSlice(nullptr, base, where.bytes, count, where.offset, where.name()));
    return Status::ok();
}

size_t ShmArenas::bytes_in_use() const
{
    std::lock_guard<std::mutex> hold(lock_);
    return in_use_;
}

size_t ShmArenas::high_water() const
{
    std::lock_guard<std::mutex> hold(lock_);
    return high_ > kHeader ? high_ - kHeader : 0;
}

}  // namespace gpurdma::transport
