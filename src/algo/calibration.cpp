#include "algo/calibration.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "algo/schedule_allreduce.h"
#include "base/text.h"
#include "reduce/reduce.h"
#include "setup/wire.h"

namespace gpurdma::algo {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kReps = 12;

// Round trips of `bytes` between this rank and peer (both call it; the leader times).
bool ping_pong(HostTeam &team, ScheduleAllreduce &runner, int peer, bool leader, size_t bytes, double *min_rtt_us)
{
    plan::Schedule s;
    s.rank = team.rank();
    s.size = team.size();
    s.bytes = bytes;
    const plan::Step send{
        plan::StepKind::Send, plan::Phase::Calibration, false, peer, plan::Buf::Recv, plan::Buf::Recv, 0, 0, bytes};
    const plan::Step recv{
        plan::StepKind::RecvCopy, plan::Phase::Calibration, false, peer, plan::Buf::Recv, plan::Buf::Recv, 0, 0, bytes};
    s.steps = leader ? std::vector<plan::Step>{send, recv} : std::vector<plan::Step>{recv, send};
    std::vector<char> buffer(bytes, 0);
    Call call;
    call.recvbuf = buffer.data();
    *min_rtt_us = 1e300;
    for (int i = 0; i < kReps; ++i) {
        const auto t0 = Clock::now();
        runner.start_schedule(s, call);
        const Status st = team.loop().run(runner);
        if (!st.is_ok()) {
            team.setup().log->log(0, "%s", st.message().c_str());
            return false;
        }
        const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
        if (i >= 2) *min_rtt_us = std::min(*min_rtt_us, us);  // the first ones warm up
    }
    return true;
}

// alpha (us) and bandwidth (GB/s) of the link to peer; only rank 0 and peer take part.
bool measure_link(HostTeam &team, ScheduleAllreduce &runner, int peer, size_t large, double *alpha, double *gbps)
{
    const bool leader = team.rank() == 0;
    if (!leader && team.rank() != peer) return true;
    const int other = leader ? peer : 0;
    double small_rtt = 0, large_rtt = 0;
    if (!ping_pong(team, runner, other, leader, 8, &small_rtt) ||
        !ping_pong(team, runner, other, leader, large, &large_rtt))
        return false;
    // Keep the MCA values unless the numbers make sense (a noisy machine can invert them).
    if (leader && large_rtt > small_rtt) {
        *alpha = small_rtt / 2;
        *gbps = static_cast<double>(large - 8) / ((large_rtt - small_rtt) / 2) / 1e3;
    }
    return true;
}

// GB/s of a chunk's worth of float sums: the size the schedules reduce at a time.
double measure_reduce(size_t chunk_size, double fallback)
{
    std::vector<float> a(chunk_size / sizeof(float), 1.0f), b(a.size(), 2.0f);
    double best = 1e300;
    for (int i = 0; i < kReps; ++i) {
        const auto r0 = Clock::now();
        reduce::apply(GPURDMA_SUM, GPURDMA_FLOAT, a.data(), a.data(), b.data(), a.size());
        best = std::min(best, std::chrono::duration<double, std::micro>(Clock::now() - r0).count());
    }
    return best > 0 ? static_cast<double>(a.size() * sizeof(float)) / best / 1e3 : fallback;
}

uint64_t bits(double v)
{
    uint64_t b;
    std::memcpy(&b, &v, sizeof b);
    return b;
}

double from_bits(uint64_t b)
{
    double v;
    std::memcpy(&v, &b, sizeof v);
    return v;
}

}  // namespace

Status calibrate(HostTeam &team)
{
    const auto t0 = Clock::now();
    const auto &topo = team.topology();
    const auto &members0 = topo.members[static_cast<size_t>(topo.node_of[0])];
    const int net_peer = team.remote_peers(0).front();  // rank 0 owns slice 0: it has a rail peer
    const int shm_peer = members0.size() > 1 ? members0[1] : -1;
    const plan::PlanParams &plan = team.plan();
    const size_t large = std::min<size_t>(64 * 1024, plan.chunk_size);
    ScheduleAllreduce runner(team);
    plan::CostModel model = plan.model;
    bool ok = measure_link(team, runner, net_peer, large, &model.net.alpha_us, &model.net.gbps);
    if (ok && shm_peer >= 0) ok = measure_link(team, runner, shm_peer, large, &model.shm.alpha_us, &model.shm.gbps);
    if (ok && team.rank() == 0) model.reduce_gbps = measure_reduce(plan.chunk_size, model.reduce_gbps);

    // Everyone takes rank 0's numbers: the plan must be the same on every rank.
    wire::Writer w;
    w.u32(ok ? 1 : 0);
    for (double v : {model.net.alpha_us, model.net.gbps, model.shm.alpha_us, model.shm.gbps, model.reduce_gbps})
        w.u64(bits(v));
    std::vector<std::string> records;
    setup::Agreement agreement(team.setup().bootstrap, team.rank(), team.size());
    if (!agreement.exchange(w.take(), &records).is_ok())
        return Status::unsupported("cost-model calibration: exchange failed");
    uint64_t values[5] = {};
    for (size_t r = 0; r < records.size(); ++r) {
        wire::Reader rd(records[r]);
        uint32_t fine = 0;
        bool readable = rd.u32(&fine);
        for (uint64_t &v : values) readable = readable && rd.u64(&v);
        if (!readable || !fine)
            return Status::unsupported("cost-model calibration failed on " +
                                       describe_rank(static_cast<int>(r), team.hosts()));
        if (r == 0) {
            model.net = {from_bits(values[0]), from_bits(values[1])};
            model.shm = {from_bits(values[2]), from_bits(values[3])};
            model.reduce_gbps = from_bits(values[4]);
        }
    }
    team.set_calibrated(model, std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    return Status::ok();
}

}  // namespace gpurdma::algo
