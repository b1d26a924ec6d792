#include "gpu/node_exchange.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "base/text.h"
#include "transport/shm_segment.h"

namespace gpurdma::gpu {

namespace {

constexpr uint64_t kReady = 0x6770726d64657631ULL;  // written last by the creator

using Clock = std::chrono::steady_clock;

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

Status NodeExchange::open(algo::HostTeam &team, std::unique_ptr<NodeExchange> *out)
{
    std::unique_ptr<NodeExchange> x(new NodeExchange(team));
    x->members_ = team.node_members();
    x->local_ = size_t(std::find(x->members_.begin(), x->members_.end(), team.rank()) - x->members_.begin());
    x->timeout_s_ = team.setup().config ? team.setup().config->timeout_s : 60;
    if (x->members_.size() > 1) {
        if (!team.segment()) return Status::error(GPURDMA_ERR_TRANSPORT, "no node segment to derive a name from");
        x->name_ = team.segment()->name() + "-dev";
        x->bytes_ = sizeof(Slot) * x->members_.size();
        const bool creator = x->local_ == 0;
        const auto deadline = Clock::now() + std::chrono::duration<double>(x->timeout_s_);
        int fd = -1;
        if (creator) {
            fd = shm_open(x->name_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
            if (fd < 0 || ftruncate(fd, static_cast<off_t>(x->bytes_)) != 0) {
                const int err = errno;
                if (fd >= 0) close(fd), shm_unlink(x->name_.c_str());
                return Status::error(GPURDMA_ERR_NO_RESOURCE,
                                     "device set-up segment " + x->name_ + ": " + std::strerror(err));
            }
        } else {
            // The creator may not be there yet: poll for a segment of the full size.
            struct stat st {};
            while ((fd = shm_open(x->name_.c_str(), O_RDWR, 0)) < 0 || fstat(fd, &st) != 0 ||
                   static_cast<size_t>(st.st_size) < x->bytes_) {
                if (fd >= 0) close(fd);
                fd = -1;
                if (Clock::now() > deadline)
                    return Status::error(
                        GPURDMA_ERR_TIMEOUT,
                        "device set-up within the node: " + describe_rank(x->members_[0], team.hosts()) +
                            " did not start it (does it pass host buffers to this call?)");
                usleep(200);
            }
        }
        void *p = mmap(nullptr, x->bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        const int err = errno;
        close(fd);
        if (p == MAP_FAILED) {
            if (creator) shm_unlink(x->name_.c_str());
            return Status::error(GPURDMA_ERR_NO_RESOURCE, "mmap of " + x->name_ + ": " + std::strerror(err));
        }
        x->base_ = static_cast<char *>(p);
        if (creator) store(x->slot(0).ready, kReady);  // ftruncate zeroed every word
        while (load(x->slot(0).ready) != kReady) {
            if (Clock::now() > deadline) return Status::error(GPURDMA_ERR_TIMEOUT, "device set-up segment not ready");
            sched_yield();
        }
    }
    // Round 1 doubles as the attach barrier: afterwards everyone has it mapped.
    std::vector<std::string> unused;
    const Status st = x->allgather("", &unused);
    if (x->base_ && x->local_ == 0) shm_unlink(x->name_.c_str());
    if (!st.is_ok()) return st;
    *out = std::move(x);
    return Status::ok();
}

NodeExchange::~NodeExchange()
{
    if (base_) munmap(base_, bytes_);
}

Status NodeExchange::wait_all(uint64_t Slot::*word, uint64_t value, const char *what)
{
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s_);
    for (size_t i = 0; i < members_.size(); ++i) {
        while (load(slot(i).*word) < value) {
            if (Clock::now() > deadline)
                return Status::error(GPURDMA_ERR_TIMEOUT,
                                     std::string("device set-up within the node timed out after ") +
                                         std::to_string(static_cast<int>(timeout_s_)) + " s waiting for " +
                                         describe_rank(members_[i], team_.hosts()) + " " + what +
                                         " (does it pass host buffers to this call?)");
            sched_yield();
        }
    }
    return Status::ok();
}

Status NodeExchange::allgather(const std::string &mine, std::vector<std::string> *all)
{
    all->assign(static_cast<size_t>(team_.size()), std::string());
    (*all)[static_cast<size_t>(team_.rank())] = mine.substr(0, kNodeRecordBytes);
    if (members_.size() < 2) return Status::ok();
    const uint64_t round = ++round_;
    // Every member has read the previous round before this one overwrites it.
    Status st = wait_all(&Slot::read, round - 1, "to read the previous round");
    if (!st.is_ok()) return st;
    Slot &me = slot(local_);
    me.length = static_cast<uint32_t>(std::min(mine.size(), kNodeRecordBytes));
    std::memcpy(me.data, mine.data(), me.length);
    store(me.posted, round);
    st = wait_all(&Slot::posted, round, "to post its record");
    if (!st.is_ok()) return st;
    for (size_t i = 0; i < members_.size(); ++i) {
        const Slot &s = slot(i);
        (*all)[static_cast<size_t>(members_[i])].assign(s.data, std::min<size_t>(s.length, kNodeRecordBytes));
    }
    store(me.read, round);
    return Status::ok();
}

Status use_node_exchange(algo::HostTeam &team, DeviceSetup *setup)
{
    std::unique_ptr<NodeExchange> opened;
    const Status joined = NodeExchange::open(team, &opened);
    if (!joined.is_ok()) return joined;
    std::shared_ptr<NodeExchange> exchange(std::move(opened));
    setup->node_allgather = [exchange](const std::string &mine, std::vector<std::string> *all) {
        return exchange->allgather(mine, all);
    };
    return Status::ok();
}

}  // namespace gpurdma::gpu
