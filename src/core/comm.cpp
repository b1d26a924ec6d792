#include "core/comm.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <stdexcept>
#include <thread>

#include "core/wire.h"
#include "exec/executor.h"
#include "plan/neighbors.h"
#include "plan/planner.h"
#include "reduce/reduce.h"

using gpurdma::plan::Schedule;

namespace {

constexpr uint32_t kWireVersion = 1;
constexpr size_t kMaxCachedSchedules = 32;

std::string this_host()
{
    char buf[256] = {0};
    if (gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
    return buf;
}

std::string format_bytes(size_t bytes)
{
    char text[64];
    if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) std::snprintf(text, sizeof text, "%zu MiB", bytes >> 20);
    else if (bytes >= 1024 && bytes % 1024 == 0) std::snprintf(text, sizeof text, "%zu KiB", bytes >> 10);
    else std::snprintf(text, sizeof text, "%zu B", bytes);
    return text;
}

}  // namespace

gpurdma_comm::gpurdma_comm(gpurdma_context *ctx, const gpurdma_comm_params_t &params)
    : context(ctx),
      rank(params.rank),
      size(params.size),
      bootstrap(params.bootstrap),
      name(params.name ? params.name : "communicator")
{
}

gpurdma_comm::~gpurdma_comm()
{
    if (channels_ && !channels_->drain(std::min(5.0, context->config.timeout_s)))
        context->log.log(1, "%s: peers did not return all landing slots before release", name.c_str());
}

std::string gpurdma_comm::describe_peer(int peer) const
{
    std::string text = "rank " + std::to_string(peer);
    if (peer >= 0 && static_cast<size_t>(peer) < hosts_.size()) text += " on host " + hosts_[peer];
    return text;
}

gpurdma_status_t gpurdma_comm::fail(gpurdma_status_t status, const std::string &message)
{
    last_error = message;
    broken_ = true;
    context->log.log(0, "%s", message.c_str());
    return status;
}

bool gpurdma_comm::exchange(const std::string &mine, std::vector<std::string> *all)
{
    // Blobs differ in size: agree on the largest first, then gather padded copies.
    const uint64_t my_len = mine.size();
    std::vector<uint64_t> lens(static_cast<size_t>(size));
    if (bootstrap.allgather(&my_len, lens.data(), sizeof my_len, bootstrap.arg) != 0) return false;
    uint64_t max_len = 0;
    for (uint64_t l : lens) max_len = std::max(max_len, l);
    std::string padded = mine;
    padded.resize(max_len, '\0');
    std::string gathered(max_len * static_cast<size_t>(size), '\0');
    if (max_len > 0 && bootstrap.allgather(padded.data(), gathered.data(), max_len, bootstrap.arg) != 0)
        return false;
    all->resize(static_cast<size_t>(size));
    for (int r = 0; r < size; ++r) (*all)[r] = gathered.substr(r * max_len, lens[r]);
    return true;
}

gpurdma_status_t gpurdma_comm::ensure_setup()
{
    using gpurdma::transport::PeerInfo;
    if (setup_ == SetupState::Ready) return GPURDMA_OK;
    if (setup_ == SetupState::Declined) return GPURDMA_ERR_UNSUPPORTED;
    const auto &cfg = context->config;
    const auto t0 = std::chrono::steady_clock::now();

    // 1. Local resources. A failure still takes part in the exchange (as an empty
    //    blob) so that every rank reaches the same decision.
    std::string why;
    std::string blob;
    const std::string host = this_host();
    try {
        gpurdma::transport::UcxContext *ucx = context->transport(&why);
        if (!ucx) throw std::runtime_error(why);
        channels_ = std::make_unique<gpurdma::transport::UcxChannels>(*ucx, rank, size, cfg.slots,
                                                                       cfg.chunk_size);
        PeerInfo me = channels_->local_info(host);
        gpurdma::wire::Writer w;
        w.u32(kWireVersion);
        w.u32(static_cast<uint32_t>(cfg.slots));
        w.u64(cfg.chunk_size);
        w.u64(me.region_base);
        w.str(me.worker_address);
        w.str(me.region_key);
        w.str(me.host);
        blob = w.take();
    } catch (const std::exception &e) {
        why = e.what();
        channels_.reset();
    }
    std::vector<std::string> blobs;
    if (!exchange(blob, &blobs)) {
        // The bootstrap itself failed: nothing can be agreed, so nothing may be used.
        channels_.reset();
        setup_ = SetupState::Declined;
        context->log.log(0, "%s: set-up exchange failed; using the previous allreduce", name.c_str());
        return GPURDMA_ERR_UNSUPPORTED;
    }

    // 2. Parse and connect.
    std::vector<PeerInfo> peers(static_cast<size_t>(size));
    hosts_.assign(static_cast<size_t>(size), "?");
    bool ok = channels_ != nullptr;
    for (int r = 0; r < size && ok; ++r) {
        gpurdma::wire::Reader rd(blobs[r]);
        uint32_t version = 0, slots = 0;
        uint64_t chunk = 0;
        if (blobs[r].empty() || !rd.u32(&version) || version != kWireVersion || !rd.u32(&slots) ||
            !rd.u64(&chunk) || !rd.u64(&peers[r].region_base) || !rd.str(&peers[r].worker_address) ||
            !rd.str(&peers[r].region_key) || !rd.str(&peers[r].host)) {
            why = "rank " + std::to_string(r) + " could not set up (or sent an unreadable address)";
            ok = false;
        } else if (slots != static_cast<uint32_t>(cfg.slots) || chunk != cfg.chunk_size) {
            why = "rank " + std::to_string(r) + " uses different slots/chunk_size parameters";
            ok = false;
        } else {
            hosts_[r] = peers[r].host;
        }
    }
    if (ok) {
        try {
            channels_->connect(peers);
        } catch (const std::exception &e) {
            why = e.what();
            ok = false;
        }
    }

    // 3. Agree: one rank's failure makes every rank decline.
    const uint8_t mine = ok ? 1 : 0;
    std::vector<uint8_t> votes(static_cast<size_t>(size));
    bool all_ok = bootstrap.allgather(&mine, votes.data(), 1, bootstrap.arg) == 0;
    int first_bad = -1;
    for (int r = 0; r < size && all_ok; ++r)
        if (!votes[r]) {
            all_ok = false;
            first_bad = r;
        }
    if (!all_ok) {
        channels_.reset();
        setup_ = SetupState::Declined;
        if (!ok)
            context->log.log(1, "%s: declined, using the previous allreduce: %s", name.c_str(), why.c_str());
        else
            context->log.log(1, "%s: declined, using the previous allreduce: rank %d could not set up",
                             name.c_str(), first_bad);
        return GPURDMA_ERR_UNSUPPORTED;
    }
    setup_ = SetupState::Ready;
    ++stats.setups;
    ++stats.registrations;
    if (rank == 0 && context->log.enabled(1)) {
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        std::set<std::string> distinct(hosts_.begin(), hosts_.end());
        const auto &p = context->plan;
        context->log.log(1,
                         "%s: %d ranks on %zu host(s); algorithm %s (recursive doubling up to %s, ring "
                         "above, %s chunks x %d slots); landing region %s per rank over UCX; set-up "
                         "%.1f ms",
                         name.c_str(), size, distinct.size(), gpurdma::plan::algorithm_name(p.algorithm),
                         format_bytes(std::min(p.small_msg_max, p.chunk_size)).c_str(),
                         format_bytes(p.chunk_size).c_str(), cfg.slots,
                         format_bytes(channels_->region_bytes()).c_str(), ms);
    }
    return GPURDMA_OK;
}

const Schedule &gpurdma_comm::schedule_for(size_t count, size_t elem_size, bool in_place)
{
    const auto key = std::make_tuple(count, elem_size, in_place);
    auto it = schedules_.find(key);
    if (it != schedules_.end()) return it->second;
    if (schedules_.size() >= kMaxCachedSchedules) schedules_.clear();
    return schedules_
        .emplace(key, gpurdma::plan::build(size, rank, count, elem_size, in_place, context->plan))
        .first->second;
}

gpurdma_status_t gpurdma_comm::run(const Schedule &schedule, const void *sendbuf, void *recvbuf,
                                   gpurdma_dtype_t dtype, gpurdma_op_t op)
{
    using gpurdma::exec::State;
    gpurdma::exec::Executor exec(schedule, *channels_, op, dtype, sendbuf, recvbuf);
    const double timeout = context->config.timeout_s;
    auto last_change = std::chrono::steady_clock::now();
    size_t last_pos = exec.position();
    unsigned idle = 0;
    for (;;) {
        const State st = exec.advance();
        if (st == State::Done) return GPURDMA_OK;
        const gpurdma::plan::Step *step = exec.current();
        if (st == State::Failed) {
            const int peer = step ? step->peer : -1;
            return fail(GPURDMA_ERR_TRANSPORT,
                        name + ": allreduce failed in " +
                            (step ? gpurdma::plan::phase_name(step->phase) : "completion") + " with " +
                            describe_peer(peer) + ": " + exec.error());
        }
        if (exec.position() != last_pos) {
            last_pos = exec.position();
            last_change = std::chrono::steady_clock::now();
            idle = 0;
            continue;
        }
        if (context->ucx->progress() != 0) {
            idle = 0;
            continue;
        }
        // Nothing moved: yield the core (ranks may outnumber cores), check the clock.
        if (++idle < 16) continue;
        std::this_thread::yield();
        if (idle % 64 != 0) continue;
        const auto now = std::chrono::steady_clock::now();
        if (std::chrono::duration<double>(now - last_change).count() > timeout) {
            std::string what;
            if (!step) what = "waiting for sends to complete";
            else if (step->kind == gpurdma::plan::StepKind::Send)
                what = "waiting for " + describe_peer(step->peer) + " to free a landing slot";
            else
                what = "waiting for data from " + describe_peer(step->peer);
            char secs[32];
            std::snprintf(secs, sizeof secs, "%.0f", timeout);
            return fail(GPURDMA_ERR_TIMEOUT,
                        name + ": allreduce timed out after " + secs + " s in " +
                            (step ? gpurdma::plan::phase_name(step->phase) : "completion") + ", " + what +
                            " (this is rank " + std::to_string(rank) + " on host " + this_host() + ")");
        }
    }
}

gpurdma_status_t gpurdma_comm::allreduce(const void *sendbuf, void *recvbuf, size_t count,
                                         gpurdma_dtype_t dtype, gpurdma_op_t op)
{
    if (broken_) return GPURDMA_ERR_BROKEN;  // last_error still names the first failure
    if (!gpurdma::reduce::supported(op, dtype)) return GPURDMA_ERR_UNSUPPORTED;
    const size_t elem = gpurdma::reduce::dtype_size(dtype);
    const bool in_place = sendbuf == nullptr || sendbuf == recvbuf;
    if (count == 0) return GPURDMA_OK;
    if (size == 1) {
        if (!in_place) std::memcpy(recvbuf, sendbuf, count * elem);
        ++stats.calls;
        return GPURDMA_OK;
    }
    const gpurdma_status_t st = ensure_setup();
    if (st != GPURDMA_OK) return st;
    const Schedule &schedule = schedule_for(count, elem, in_place);
    if (context->log.enabled(2))
        context->log.log(2, "%s: allreduce %zu x %s %s: %s, %zu steps", name.c_str(), count,
                         gpurdma_dtype_name(dtype), gpurdma_op_name(op), schedule.algorithm.c_str(),
                         schedule.steps.size());
    const gpurdma_status_t rs = run(schedule, in_place ? nullptr : sendbuf, recvbuf, dtype, op);
    if (rs != GPURDMA_OK) return rs;
    ++stats.calls;
    if (schedule.algorithm == "ring") ++stats.ring_calls;
    else ++stats.rd_calls;
    stats.bytes_put = channels_->bytes_put();
    return GPURDMA_OK;
}
