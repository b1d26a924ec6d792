#include "transport/landing_pool.h"

#include <unistd.h>

#include <cstring>
#include <iterator>

namespace gpurdma::transport {

namespace {

size_t whole_pages(size_t bytes)
{
    const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return (bytes + page - 1) / page * page;
}

}  // namespace

LandingSlice::~LandingSlice()
{
    if (!kept_) pool_.give_back(region_, offset_, bytes_);
}

Status LandingPool::take(size_t bytes, size_t cleared, std::unique_ptr<LandingSlice> *out)
{
    const size_t want = whole_pages(bytes > 0 ? bytes : 1);
    std::lock_guard<std::mutex> hold(lock_);
    const Region *from = nullptr;
    size_t offset = 0;
    // First fit over the regions in the order they were made: slices gather in the first.
    for (Region &r : regions_) {
        for (auto it = r.free.begin(); it != r.free.end(); ++it) {
            if (it->second < want) continue;
            offset = it->first;
            const size_t left = it->second - want;
            r.free.erase(it);
            if (left > 0) r.free.emplace(offset + want, left);
            from = &r;
            break;
        }
        if (from) break;
    }
    if (!from) {
        Region r;
        const Status made = RegisteredRegion::create(context_, std::max(want, kRegionBytes), &r.memory);
        if (!made.is_ok()) return made;
        if (r.memory->length() > want) r.free.emplace(want, r.memory->length() - want);
        regions_.push_back(std::move(r));
        from = &regions_.back();
        offset = 0;
    }
    out->reset(new LandingSlice(*this, from->memory.get(), offset, want));
    std::memset((*out)->base(), 0, std::min(cleared, want));
    return Status::ok();
}

void LandingPool::give_back(const RegisteredRegion *region, size_t offset, size_t bytes)
{
    std::lock_guard<std::mutex> hold(lock_);
    for (Region &r : regions_) {
        if (r.memory.get() != region) continue;
        auto next = r.free.emplace(offset, bytes).first;
        // Coalesce with the free ranges on either side.
        if (auto after = std::next(next); after != r.free.end() && next->first + next->second == after->first) {
            next->second += after->second;
            r.free.erase(after);
        }
        if (next != r.free.begin()) {
            auto before = std::prev(next);
            if (before->first + before->second == next->first) {
                before->second += next->second;
                r.free.erase(next);
            }
        }
        return;
    }
}

size_t LandingPool::regions() const
{
    std::lock_guard<std::mutex> hold(lock_);
    return regions_.size();
}

size_t LandingPool::bytes_free() const
{
    std::lock_guard<std::mutex> hold(lock_);
    size_t free = 0;
    for (const Region &r : regions_)
        for (const auto &f : r.free) free += f.second;
    return free;
}

}  // namespace gpurdma::transport
