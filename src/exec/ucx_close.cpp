#include "exec/ucx_close.h"

#include <string>

#include "exec/channel_release.h"
#include "exec/task.h"

namespace gpurdma::exec {

namespace {

class EndpointsClose final : public Task {
public:
    explicit EndpointsClose(transport::UcxContext &ucx) : ucx_(ucx) {}
    State advance() override
    {
        const size_t running = ucx_.closes_running();
        if (running != running_) {
            running_ = running;
            ++moves_;
        }
        return running == 0 ? State::Done : State::Running;
    }
    uint64_t position() const override { return moves_; }
    std::string describe_wait() const override { return "the close of " + std::to_string(running_) + " UCX endpoints"; }
    std::string describe_failure() const override { return describe_wait(); }

private:
    transport::UcxContext &ucx_;
    size_t running_ = 0;
    uint64_t moves_ = 0;
};

// Nothing counts as movement: a worker that never goes idle meets the bound.
class WorkerQuiet final : public Task {
public:
    explicit WorkerQuiet(transport::UcxContext &ucx) : ucx_(ucx) {}
    State advance() override { return ucx_.worker_quiet() ? State::Done : State::Running; }
    uint64_t position() const override { return 0; }
    std::string describe_wait() const override { return "the UCX worker going idle"; }
    std::string describe_failure() const override { return describe_wait(); }

private:
    transport::UcxContext &ucx_;
};

}  // namespace

void close_ucx(std::unique_ptr<transport::UcxContext> ucx, double spin_us, const Logger *log)
{
    if (!ucx) return;
    WaitPolicy policy;
    policy.spin_us = spin_us;
    const WaitSite site{"UCX", 0, ""};
    ucx->start_close();
    EndpointsClose closes(*ucx);
    WorkerQuiet quiet(*ucx);
    for (Task *task : {static_cast<Task *>(&closes), static_cast<Task *>(&quiet)}) {
        const double bound = task == &closes ? kCloseBound : kQuietBound;
        if (!run_teardown(*task, policy, bound, site) && log)
            log->log(1, "UCX at its end: released after %g s without progress, still waiting for %s", bound,
                     task->describe_wait().c_str());
    }
    ucx.reset();
}

}  // namespace gpurdma::exec
