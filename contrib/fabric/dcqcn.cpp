// DCQCN's reaction and notification points; see dcqcn.h.
#include "dcqcn.h"

#include <algorithm>
#include <cmath>

namespace gpurdma::fabric {

ReactionPoint::ReactionPoint(const DcqcnParams &params, double line_gbps)
    : line_(line_gbps),
      rc_(line_gbps),  // a new QP starts at line rate
      rt_(line_gbps),
      g_(params.g),
      alpha_timer_us_(params.alpha_timer_us > 0 ? params.alpha_timer_us : 1),
      rai_(params.rai_gbps > 0 ? params.rai_gbps : line_gbps / 1000),
      rhai_(params.rhai_gbps > 0 ? params.rhai_gbps : line_gbps / 200),
      min_rate_(std::min(params.min_rate_gbps, line_gbps)),
      f_(params.fast_recovery_steps),
      byte_counter_(params.byte_counter > 0 ? params.byte_counter : 1)
{}

double ReactionPoint::alpha(double now_us) const
{
    if (last_cnp_us_ < 0) return alpha_at_cnp_;
    double periods = std::floor((now_us - last_cnp_us_) / alpha_timer_us_);
    if (periods <= 0) return alpha_at_cnp_;
    return alpha_at_cnp_ * std::pow(1 - g_, periods);
}

void ReactionPoint::on_cnp(double now_us)
{
    double a = alpha(now_us);
    rt_ = rc_;
    rc_ = std::max(min_rate_, rc_ * (1 - a / 2));
    alpha_at_cnp_ = (1 - g_) * a + g_;
    last_cnp_us_ = now_us;
    timer_stage_ = 0;
    byte_stage_ = 0;
    bytes_ = 0;
    ++cuts_;
}

void ReactionPoint::on_timer()
{
    if (!recovering()) return;
    ++timer_stage_;
    increase();
}

bool ReactionPoint::on_bytes_sent(uint64_t bytes)
{
    if (!recovering()) return false;
    bytes_ += bytes;
    if (bytes_ < byte_counter_) return false;
    bytes_ -= byte_counter_;
    ++byte_stage_;
    increase();
    return true;
}

// The paper's increase: fast recovery while both stages are within F, hyper increase once
// both are past it, additive increase between.
void ReactionPoint::increase()
{
    int hi = std::max(timer_stage_, byte_stage_), lo = std::min(timer_stage_, byte_stage_);
    if (hi > f_) {
        if (lo > f_) rt_ += (lo - f_) * rhai_;
        else rt_ += rai_;
    }
    rt_ = std::min(rt_, line_);
    rc_ = (rt_ + rc_) / 2;
    // (Rt + Rc) / 2 only approaches Rt: snap the last fraction so the timer can stop.
    if (line_ - rc_ < line_ * 1e-6) rc_ = line_;
}

bool NotificationPoint::on_marked(double now_us)
{
    if (last_us_ >= 0 && now_us - last_us_ < interval_us_) return false;
    last_us_ = now_us;
    return true;
}

}  // namespace gpurdma::fabric
