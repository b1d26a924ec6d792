// A node-local shared-memory segment private to the job: created 0600 with
// O_EXCL|O_NOFOLLOW under a unique name by one rank, attached by its node peers,
// and unlinked as soon as they all have it, so a crash leaves nothing behind.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "base/noncopyable.h"
#include "base/status.h"

namespace gpurdma::transport {

class ShmSegment : private NonCopyable {
public:
    // A new segment of `bytes` under a fresh name, or why not (e.g. /dev/shm full).
    static Status create(size_t bytes, std::unique_ptr<ShmSegment> *out);
    // A node peer's segment by its name: refused unless ours, private and of that size.
    static Status attach(const std::string &name, size_t bytes, std::unique_ptr<ShmSegment> *out);
    ~ShmSegment();

    char *base() const { return base_; }
    size_t bytes() const { return bytes_; }
    const std::string &name() const { return name_; }
    // Removes the name (idempotent); the mapping stays valid.
    void unlink();

private:
    ShmSegment(std::string name, char *base, size_t bytes, bool owner)
        : name_(std::move(name)), base_(base), bytes_(bytes), owner_(owner)
    {}
    std::string name_;
    char *base_;
    size_t bytes_;
    bool owner_;
    bool linked_ = true;
};

}  // namespace gpurdma::transport
