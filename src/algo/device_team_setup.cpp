#include "algo/device_team_setup.h"

#include "gpu/buffer_query.h"
#include "reduce/reduce_device.h"
#include "setup/wire.h"

namespace gpurdma::algo {

namespace {

std::string vote_record(const Status &st)
{
    return st.is_ok() ? std::string() : "-" + st.message();
}

}  // namespace

DeviceTeamSetUp::DeviceTeamSetUp(const gpu::DeviceSetup &setup, HostTeam &host, const gpu::PointerInfo &buffer,
                                 const std::string &exchange)
    : exchange_(host, exchange), team_(new gpu::DeviceTeam(setup, buffer.context))
{
    mine_ = team_->open_local();  // driver, kernels, stream: local, no peer involved
}

bool DeviceTeamSetUp::round(const std::string &mine, std::vector<std::string> *all, Status *st)
{
    if (!posted_) {
        bool posted = false;
        *st = exchange_.post(mine, &posted);
        if (!st->is_ok() || !posted) return false;
        posted_ = true;
    }
    bool done = false;
    *st = exchange_.collect(all, &done);
    if (!st->is_ok() || !done) return false;
    posted_ = false;
    ++rounds_;
    return true;
}

Status DeviceTeamSetUp::verdict_of(const std::vector<std::string> &all) const
{
    for (int r : team_->members_)
        if (!all[static_cast<size_t>(r)].empty())
            return Status::unsupported(team_->describe(r) + ": " + all[static_cast<size_t>(r)].substr(1));
    return Status::ok();
}

Status DeviceTeamSetUp::step(bool *done, std::unique_ptr<gpu::DeviceTeam> *team)
{
    *done = false;
    const auto failed = [](const Status &st) { return st.prefixed("device set-up: "); };
    const gpu::DeviceSetup &setup = team_->setup_;
    std::vector<std::string> all;
    Status st;
    switch (round_) {
        case Round::Open: {
            bool open = false;
            st = exchange_.open_step(&open);
            if (!st.is_ok()) return failed(st);
            if (!open) return Status::ok();
            round_ = Round::Records;
        }
            [[fallthrough]];
        case Round::Records: {
            // Where every rank is (host, node), and its GPU.
            wire::Writer w;
            w.str(setup.host);
            w.str(setup.node.empty() ? setup.host : setup.node);
            w.str(team_->bus_id_);
            if (!round(w.take(), &all, &st)) return st.is_ok() ? st : failed(st);
            st = team_->read_records(all, true);
            if (!st.is_ok()) return failed(st);
            // The node's lowest rank creates the node's control block; every rank learns its name.
            if (mine_.is_ok()) mine_ = team_->create_control_block();
            round_ = Round::Names;
        }
            [[fallthrough]];
        case Round::Names:
            if (!round(team_->segment_ ? team_->segment_->name() : std::string(), &all, &st))
                return st.is_ok() ? st : failed(st);
            segment_name_ = all[static_cast<size_t>(team_->members_[0])];
            round_ = Round::Vote;
            [[fallthrough]];
        case Round::Vote: {
            if (!round(vote_record(mine_), &all, &st)) return st.is_ok() ? st : failed(st);
            verdict_ = verdict_of(all);
            // Every rank holds the same records, so every rank reaches the same verdict.
            const bool one_node = !team_->spans_nodes();
            if (verdict_.is_ok() && !one_node && !setup.node_scope)
                verdict_ = Status::unsupported("ranks on several nodes");
            if (verdict_.is_ok() && team_->largest_node_ > size_t(reduce::device::kMaxSources))
                verdict_ = Status::unsupported(std::to_string(team_->largest_node_) +
                                               " ranks on a node (device path handles up to " +
                                               std::to_string(reduce::device::kMaxSources) + ")");
            if (!verdict_.is_ok() || setup.size == 1) {
                round_ = Round::Done;
                break;
            }
            // Attach the control block and check peer access within the node.
            attach_ = team_->attach_and_check_peers(segment_name_);
            round_ = Round::Attach;
        }
            [[fallthrough]];
        case Round::Attach:
            if (!round(vote_record(attach_), &all, &st)) return st.is_ok() ? st : failed(st);
            verdict_ = verdict_of(all);
            if (team_->segment_) team_->segment_->unlink();  // every peer has it mapped (or gave up)
            round_ = Round::Done;
            [[fallthrough]];
        case Round::Done: break;
    }
    const Status finished = finish(team);
    if (finished.is_ok()) *done = true;
    return finished;
}

Status DeviceTeamSetUp::finish(std::unique_ptr<gpu::DeviceTeam> *team)
{
    const gpu::DeviceSetup &setup = team_->setup_;
    const bool one_node = !team_->spans_nodes();
    if (verdict_.is_ok()) {
        if (one_node) team_->log_ready();
        *team = std::move(team_);
        return Status::ok();
    }
    if (!one_node) team_->log_inter_node_verdict();
    else if (setup.rank == 0 && setup.log && setup.log->enabled(1))
        setup.log->log(1, "%s: device buffers: staged through host memory (%s)", setup.name.c_str(),
                       verdict_.message().c_str());
    return verdict_;
}

exec::State step_call_set_up(const Call &call, const gpu::DeviceSetup &setup, const CallSetUpHooks &hooks,
                             std::unique_ptr<DeviceTeamSetUp> *setting_up, std::unique_ptr<gpu::DeviceTeam> *team,
                             DeviceSetUp *state, uint64_t *position, std::string *failure)
{
    Status st;
    if (*setting_up) {
        bool done = false;
        st = (*setting_up)->step(&done, team);
        if (st.is_ok() && !done) return exec::State::Running;
        setting_up->reset();
        ++*position;
        if (st.is_unsupported()) *state = DeviceSetUp::Staged;  // this communicator stages from now on
    } else if (!*team) {
        st = Status::error(GPURDMA_ERR_INVALID, "device set-up: resumed without a team");
    }
    if (st.is_ok() && hooks.ready) {
        bool ready = false;
        st = hooks.ready(&ready);
        if (st.is_ok() && !ready) return exec::State::Running;
    }
    if (st.is_ok()) {
        *state = DeviceSetUp::Ready;
        gpu::PointerInfo sinfo, rinfo;
        gpu::buffer_info(setup.buffers, {call.sendbuf, call.recvbuf}, &sinfo, &rinfo);
        st = hooks.begin(sinfo, rinfo);
    }
    if (st.is_unsupported()) return exec::State::Declined;
    if (!st.is_ok()) {
        *failure = st.message();
        return exec::State::Failed;
    }
    return exec::State::Running;
}

}  // namespace gpurdma::algo
