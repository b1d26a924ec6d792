// Node shared memory for every communicator of the process. Each process that leads a
// communicator on its node (its first rank there) hands out slices of one sparse memory
// file of its own (memfd: no name in /dev/shm, nothing left behind by a crash, not
// limited by /dev/shm's size); a node peer maps that file once, through
// /proc/<pid>/fd/<fd> as UCX's posix transport does, and keeps the mapping for every
// later communicator. Creating a communicator then costs no file, no mapping and no
// page: pages come as its calls touch them (as Open MPI's own shared-memory segments
// do), and a freed communicator's slice is reused once every rank that used it has let
// go of it (a count in the slice that each decrements, the owner reclaiming at zero).
// Capacity 0: each communicator gets its own named segment (shm_segment.h) instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/noncopyable.h"
#include "base/status.h"
#include "setup/wire.h"

namespace gpurdma::transport {

// Where a slice is: what its owner writes into its set-up record and a node peer reads.
struct SliceAddress {
    int32_t pid = 0;  // the owner's, and its file's descriptor there
    int32_t fd = -1;
    uint64_t nonce = 0;  // the file's own (at its start): a peer checks it reached that file
    uint64_t capacity = 0;  // the file's size
    uint64_t offset = 0;  // the slice's
    uint64_t bytes = 0;
    uint64_t serial = 0;  // never reused by the owner: names what the communicator derives from it

    void write(wire::Writer &w) const;
    bool read(wire::Reader &r);
    // A name unique to this slice, the same on every rank ("/gpurdma-<uid>-<pid>-<nonce>-<serial>").
    std::string name() const;
};

class ShmArenas;

// One rank's hold on a communicator's slice: its bytes, mapped. Releasing it drops the
// rank's count; the slice is reused only when every rank has dropped its own.
class ShmSlice : private NonCopyable {
public:
    ~ShmSlice();
    char *base() const { return base_; }
    size_t bytes() const { return bytes_; }
    const std::string &name() const { return name_; }

private:
    friend class ShmArenas;
    ShmSlice(ShmArenas *owner_arena, char *base, size_t bytes, uint64_t *count, size_t offset, std::string name)
        : arenas_(owner_arena), base_(base), bytes_(bytes), count_(count), offset_(offset), name_(std::move(name))
    {}
    ShmArenas *arenas_;  // set on the owner's hold: it retires the slice
    char *base_;
    size_t bytes_;
    uint64_t *count_;  // ranks still holding the slice (in the slice, after its bytes)
    size_t offset_;
    std::string name_;
};

class ShmArenas : private NonCopyable {
public:
    // capacity: the most bytes this process's own file hands out (0: none).
    explicit ShmArenas(size_t capacity) : capacity_(capacity) {}
    ~ShmArenas();

    bool enabled() const { return capacity_ > 0; }
    // A slice of `bytes` for `holders` ranks (this one among them) with the ranges in
    // `cleared` (offset, length) zero, and where it is for the others; or why not (the
    // file full, no memfd).
    Status take(size_t bytes, int holders, const std::vector<std::pair<size_t, size_t>> &cleared,
                std::unique_ptr<ShmSlice> *out, SliceAddress *where);
    // A node peer's slice: its owner's file mapped on first use.
    Status attach(const SliceAddress &where, std::unique_ptr<ShmSlice> *out);

    // This process's file: bytes handed out now, and the most it ever had (pages used).
    size_t bytes_in_use() const;
    size_t high_water() const;

private:
    friend class ShmSlice;
    struct Range {
        size_t offset;
        size_t bytes;
    };
    Status open_own();
    // Slices every holder has let go of go back to the free ranges (lock held).
    void reclaim();
    void retire(size_t offset, size_t bytes);
    static size_t footprint(size_t bytes);  // bytes + the holders' count, in whole pages

    const size_t capacity_;
    mutable std::mutex lock_;  // communicators come and go on any thread
    // Our own file (fd_ >= 0 once made).
    int fd_ = -1;
    char *own_ = nullptr;
    uint64_t nonce_ = 0;
    size_t high_ = 0;  // fresh pages start here (never handed out: already zero)
    size_t in_use_ = 0;
    uint64_t serial_ = 0;
    std::map<size_t, size_t> free_;  // reused ranges, offset -> bytes, coalesced
    std::vector<Range> retired_;  // freed by us, perhaps still held by peers
    // Peers' files mapped here, by (pid, nonce): kept until the process ends.
    struct Mapping {
        char *base;
        size_t bytes;
    };
    std::map<std::pair<int32_t, uint64_t>, Mapping> peers_;
};

}  // namespace gpurdma::transport
