// DCQCN's two end-point state machines (Y. Zhu et al., "Congestion Control for Large-Scale
// RDMA Deployments", SIGCOMM 2015): the notification point (the receiving NIC, which turns
// ECN-marked packets into CNPs) and the reaction point (the sending QP, which cuts its rate
// on a CNP and climbs back on timer and byte-counter events). They hold state only: the
// fabric model owns the clock and schedules the rate timer, so these are easy to test alone.
#pragma once

#include <cstdint>

namespace gpurdma::fabric {

struct DcqcnParams {  // DCQCN (Zhu et al., SIGCOMM 2015), scaled to the line rate
    double g = 1.0 / 256;  // alpha gain
    double alpha_timer_us = 55;  // alpha decays when no CNP arrived for this long
    double rate_timer_us = 55;  // rate-increase timer
    uint64_t byte_counter = 10ull << 20;  // rate-increase byte counter
    int fast_recovery_steps = 5;  // F
    double rai_gbps = 0;  // additive increase; 0: line_rate / 1000 (the paper's 40 Mb/s at 40 Gb/s)
    double rhai_gbps = 0;  // hyper increase; 0: line_rate / 200 (paper-like 200 Mb/s at 40 Gb/s)
    double min_rate_gbps = 0.1;
    double cnp_interval_us = 50;  // NP: at most one CNP per flow per this interval
};

// One sending QP's rate. Times are in microseconds of simulated time.
class ReactionPoint {
public:
    ReactionPoint() = default;
    ReactionPoint(const DcqcnParams &params, double line_gbps);

    double rate_gbps() const { return rc_; }  // Rc: what the QP is paced at
    double target_gbps() const { return rt_; }  // Rt
    // Alpha as the alpha timer has left it at now_us. It decays lazily: (1-g) per whole
    // alpha_timer_us since the last CNP, which is what a timer restarted by every CNP gives.
    double alpha(double now_us) const;
    int timer_stage() const { return timer_stage_; }
    int byte_stage() const { return byte_stage_; }
    uint64_t cuts() const { return cuts_; }
    // Below line rate (or the target is): increase events still change the rate, so the
    // owner keeps the rate timer running.
    bool recovering() const { return rc_ < line_ || rt_ < line_; }

    // A CNP arrived: Rt = Rc, Rc *= 1 - alpha/2, alpha grows, both increase stages restart.
    // The owner restarts its rate timer.
    void on_cnp(double now_us);
    // The rate timer expired (the owner re-arms it while recovering()).
    void on_timer();
    // `bytes` more were sent; returns true when that passed a byte-counter stage (the rate
    // changed). Only counts while recovering: at line rate there is nothing to increase.
    bool on_bytes_sent(uint64_t bytes);

private:
    void increase();

    double line_ = 0, rc_ = 0, rt_ = 0;
    double g_ = 0, alpha_timer_us_ = 1, rai_ = 0, rhai_ = 0, min_rate_ = 0;
    int f_ = 5;
    uint64_t byte_counter_ = 1;
    double alpha_at_cnp_ = 1;  // alpha just after the last CNP (1 before the first, as the paper starts)
    double last_cnp_us_ = -1;  // < 0: no CNP yet, alpha does not decay
    int timer_stage_ = 0, byte_stage_ = 0;
    uint64_t bytes_ = 0, cuts_ = 0;
};

// The receiving NIC's side for one flow: a CNP per marked packet, at most one per interval.
class NotificationPoint {
public:
    NotificationPoint() = default;
    explicit NotificationPoint(double interval_us) : interval_us_(interval_us) {}
    // A marked packet arrived at now_us: true when a CNP goes back now.
    bool on_marked(double now_us);

private:
    double interval_us_ = 50;
    double last_us_ = -1;  // < 0: none sent yet
};

}  // namespace gpurdma::fabric
