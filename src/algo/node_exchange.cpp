#include "algo/node_exchange.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "base/text.h"
#include "transport/shm_segment.h"

namespace gpurdma::algo {

namespace {

constexpr uint64_t kReady = 0x6770726d64657631ULL;  // written last by the creator

}  // namespace

struct NodeExchange::Slot {
    alignas(64) uint64_t posted;  // round whose record is in data
    alignas(64) uint64_t read;  // round this rank has read every member's record of
    alignas(64) uint64_t ready;  // slot 0 only: kReady once the segment is initialised
    uint32_t length;
    char data[kNodeRecordBytes];
};

namespace {

uint64_t load(const uint64_t &w)
{
    return __atomic_load_n(&w, __ATOMIC_ACQUIRE);
}

void store(uint64_t &w, uint64_t v)
{
    __atomic_store_n(&w, v, __ATOMIC_RELEASE);
}

}  // namespace

NodeExchange::Slot &NodeExchange::slot(size_t local) const
{
    return reinterpret_cast<Slot *>(base_)[local];
}

NodeExchange::NodeExchange(HostTeam &team, const std::string &suffix) : team_(team)
{
    members_ = team.node_members();
    local_ = size_t(std::find(members_.begin(), members_.end(), team.rank()) - members_.begin());
    if (members_.size() > 1 && team.node_memory()) name_ = team.node_memory()->name + suffix;
    bytes_ = sizeof(Slot) * members_.size();
}

NodeExchange::~NodeExchange()
{
    if (linked_) shm_unlink(name_.c_str());  // a set-up abandoned before its barrier
    if (base_) munmap(base_, bytes_);
}

// The creator makes the segment at once; the others look for it, complete, each time.
Status NodeExchange::attach()
{
    if (name_.empty()) return Status::error(GPURDMA_ERR_TRANSPORT, "no node segment to derive a name from");
    const bool creator = local_ == 0;
    int fd = -1;
    if (creator) {
        fd = shm_open(name_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes_)) != 0) {
            const int err = errno;
            if (fd >= 0) close(fd), shm_unlink(name_.c_str());
            return Status::error(GPURDMA_ERR_NO_RESOURCE, "device set-up segment " + name_ + ": " + std::strerror(err));
        }
        linked_ = true;
    } else {
        struct stat st {};
        fd = shm_open(name_.c_str(), O_RDWR, 0);
        if (fd >= 0 && (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < bytes_)) {
            close(fd);
            fd = -1;
        }
        if (fd < 0) return Status::ok();  // not there yet: base_ stays null
    }
    void *p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int err = errno;
    close(fd);
    if (p == MAP_FAILED) return Status::error(GPURDMA_ERR_NO_RESOURCE, "mmap of " + name_ + ": " + std::strerror(err));
    base_ = static_cast<char *>(p);
    if (creator) store(slot(0).ready, kReady);  // ftruncate zeroed every word
    return Status::ok();
}

Status NodeExchange::open_step(bool *done)
{
    *done = false;
    if (members_.size() < 2) {
        *done = true;
        return Status::ok();
    }
    switch (phase_) {
        case Phase::Attach: {
            const Status st = attach();
            if (!st.is_ok()) return st;
            if (!base_) {
                awaited_ = 0;
                awaited_what_ = "to create the set-up segment";
                return Status::ok();
            }
            phase_ = Phase::Ready;
        }
            [[fallthrough]];
        case Phase::Ready:
            if (load(slot(0).ready) != kReady) {
                awaited_ = 0;
                awaited_what_ = "to initialise the set-up segment";
                return Status::ok();
            }
            phase_ = Phase::Barrier;
            [[fallthrough]];
        case Phase::Barrier: {
            // Round 1 doubles as the attach barrier: afterwards everyone has it mapped.
            bool posted = false;
            const Status st = post("", &posted);
            if (!st.is_ok() || !posted) return st;
            phase_ = Phase::BarrierCollect;
        }
            [[fallthrough]];
        case Phase::BarrierCollect: {
            std::vector<std::string> unused;
            bool collected = false;
            const Status st = collect(&unused, &collected);
            if (!st.is_ok() || !collected) return st;
            if (linked_) shm_unlink(name_.c_str());
            linked_ = false;
            phase_ = Phase::Open;
        }
            [[fallthrough]];
        case Phase::Open: *done = true; return Status::ok();
    }
    return Status::ok();
}

bool NodeExchange::member_reached(uint64_t Slot::*word, uint64_t value, const char *what)
{
    for (size_t i = 0; i < members_.size(); ++i) {
        if (load(slot(i).*word) >= value) continue;
        awaited_ = i;
        awaited_what_ = what;
        return false;
    }
    return true;
}

Status NodeExchange::post(const std::string &mine, bool *posted)
{
    *posted = false;
    mine_ = mine.substr(0, kNodeRecordBytes);
    const uint64_t round = round_ + 1;
    if (members_.size() > 1) {
        // Every member has read the previous round before this one overwrites it.
        if (!member_reached(&Slot::read, round - 1, "to read the previous set-up round")) return Status::ok();
        Slot &me = slot(local_);
        me.length = static_cast<uint32_t>(mine_.size());
        std::memcpy(me.data, mine_.data(), me.length);
        store(me.posted, round);
    }
    round_ = round;
    *posted = true;
    return Status::ok();
}

Status NodeExchange::collect(std::vector<std::string> *all, bool *done)
{
    *done = false;
    if (members_.size() > 1 && !member_reached(&Slot::posted, round_, "to post its set-up record")) return Status::ok();
    all->assign(static_cast<size_t>(team_.size()), std::string());
    (*all)[static_cast<size_t>(team_.rank())] = mine_;
    if (members_.size() > 1) {
        for (size_t i = 0; i < members_.size(); ++i) {
            const Slot &s = slot(i);
            (*all)[static_cast<size_t>(members_[i])].assign(s.data, std::min<size_t>(s.length, kNodeRecordBytes));
        }
        store(slot(local_).read, round_);
    }
    *done = true;
    return Status::ok();
}

uint64_t NodeExchange::position() const
{
    uint64_t p = (base_ ? 1 : 0) + static_cast<uint64_t>(phase_);
    if (base_ && load(slot(0).ready) == kReady)
        for (size_t i = 0; i < members_.size(); ++i) p += load(slot(i).posted) + load(slot(i).read);
    return p;
}

std::string NodeExchange::describe_wait() const
{
    return "device set-up within the node, waiting for " + describe_rank(members_[awaited_], team_.hosts()) + " " +
           awaited_what_ + " (does it pass host buffers to this call?)";
}

}  // namespace gpurdma::algo
