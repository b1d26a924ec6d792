// The state behind gpurdma_comm_t: lazy set-up on first use, cached schedules, and
// the wait loop that drives a schedule with progress, yielding and a timeout.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/context.h"
#include "gpurdma/gpurdma.h"
#include "plan/schedule.h"
#include "transport/ucx_channels.h"

struct gpurdma_comm {
    gpurdma_comm(gpurdma_context *context, const gpurdma_comm_params_t &params);
    ~gpurdma_comm();

    gpurdma_status_t allreduce(const void *sendbuf, void *recvbuf, size_t count,
                               gpurdma_dtype_t dtype, gpurdma_op_t op);

    gpurdma_context *context;
    int rank;
    int size;
    gpurdma_bootstrap_t bootstrap;
    std::string name;
    std::string last_error;
    gpurdma_comm_stats_t stats{};

private:
    enum class SetupState { NotYet, Ready, Declined };

    gpurdma_status_t ensure_setup();
    bool exchange(const std::string &mine, std::vector<std::string> *all);
    const gpurdma::plan::Schedule &schedule_for(size_t count, size_t elem_size, bool in_place);
    gpurdma_status_t run(const gpurdma::plan::Schedule &schedule, const void *sendbuf, void *recvbuf,
                         gpurdma_dtype_t dtype, gpurdma_op_t op);
    gpurdma_status_t fail(gpurdma_status_t status, const std::string &message);
    std::string describe_peer(int peer) const;

    SetupState setup_ = SetupState::NotYet;
    bool broken_ = false;
    std::unique_ptr<gpurdma::transport::UcxChannels> channels_;
    std::vector<std::string> hosts_;
    std::map<std::tuple<size_t, size_t, bool>, gpurdma::plan::Schedule> schedules_;
};
