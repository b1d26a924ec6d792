#include "exec/executor.h"

#include "obs/flight_recorder.h"

namespace gpurdma::exec {

using plan::Buf;
using plan::Step;
using plan::StepKind;

Executor::Executor(const plan::Schedule &schedule, transport::PeerTransport &transport, gpurdma_op_t op,
                   gpurdma_dtype_t dtype, const void *sendbuf, void *recvbuf, LocalWork &work)
    : schedule_(schedule),
      transport_(transport),
      op_(op),
      dtype_(dtype),
      send_(static_cast<const char *>(sendbuf ? sendbuf : recvbuf)),
      recv_(static_cast<char *>(recvbuf)),
      work_(work)
{}

const Step *Executor::current() const
{
    return pc_ < schedule_.steps.size() ? &schedule_.steps[pc_] : nullptr;
}

const void *Executor::source(Buf buf, size_t off) const
{
    if (buf == Buf::Stage) return stage_ + off;
    return (buf == Buf::Send ? send_ : recv_) + off;
}

void *Executor::destination(Buf buf, size_t off) const
{
    // Nothing writes the send buffer: only the receive (or staging) buffer is ours.
    return (buf == Buf::Stage ? stage_ : recv_) + off;
}

bool Executor::ok(const Status &st, bool *failed)
{
    if (st.is_ok()) return true;
    *failed = true;
    error_ = st.message();
    return false;
}

// A step in up to three phases, each resumed where it stopped: begin (start its local
// work), wait for that work, complete (send; return a receive's slot).
bool Executor::run_step(const Step &step, bool *failed)
{
    if (phase_ == StepPhase::Begin) {
        if (!begin(step, failed)) return false;
        phase_ = StepPhase::Working;
    }
    if (phase_ == StepPhase::Working) {
        bool done = false;
        if (!ok(work_.finished(&done), failed) || !done) return false;
        phase_ = StepPhase::Complete;
    }
    if (!complete(step, failed)) return false;
    phase_ = StepPhase::Begin;
    return true;
}

// Starts the step's local work; false while it must wait first (or failed).
bool Executor::begin(const Step &step, bool *failed)
{
    switch (step.kind) {
        case StepKind::Copy: {
            void *dst = destination(step.dst_buf, step.dst_off);
            const void *src = source(step.src_buf, step.src_off);
            if (transport_.source_busy(dst, step.bytes)) return false;
            return dst == src || ok(work_.copy(dst, src, step.bytes), failed);
        }
        case StepKind::NodeReduce: {
            void *dst = destination(step.dst_buf, step.dst_off);
            if (transport_.source_busy(dst, step.bytes)) return false;
            if (!node_ || node_->empty())
                return ok(Status::error(GPURDMA_ERR_INVALID, "node reduce without sources"), failed);
            node_spans_.clear();
            for (const void *base : *node_) node_spans_.push_back(static_cast<const char *>(base) + step.src_off);
            return ok(work_.reduce_many(op_, dtype_, dst, node_spans_.data(), static_cast<int>(node_spans_.size()),
                                        step.bytes / schedule_.elem_size, schedule_.elem_size),
                      failed);
        }
        case StepKind::Send:
            send_from_ = nullptr;
            return ok(work_.send_source(source(step.src_buf, step.src_off), step.bytes, &send_from_), failed) &&
                   send_from_ != nullptr;
        case StepKind::RecvReduce:
        case StepKind::RecvCopy: {
            void *dst = destination(step.dst_buf, step.dst_off);
            // A send may still be reading the bytes we are about to overwrite.
            if (transport_.source_busy(dst, step.bytes)) return false;
            const void *landed = transport_.try_receive(step.peer, step.bytes, work_.reader());
            if (!landed) return false;
            if (step.kind == StepKind::RecvCopy) return ok(work_.copy(dst, landed, step.bytes), failed);
            const void *local = source(step.src_buf, step.src_off);
            const void *a = step.landed_first ? landed : local;
            const void *b = step.landed_first ? local : landed;
            return ok(work_.reduce(op_, dtype_, dst, a, b, step.bytes / schedule_.elem_size), failed);
        }
    }
    return false;
}

// After the step's local work is done: false while it must wait (or failed).
bool Executor::complete(const Step &step, bool *failed)
{
    switch (step.kind) {
        case StepKind::Copy:
        case StepKind::NodeReduce: return true;
        case StepKind::Send: {
            const transport::Poll p = transport_.try_send(step.peer, send_from_, step.bytes, work_.reader());
            if (p == transport::Poll::Failed) {
                *failed = true;
                error_ = transport_.error();
            }
            if (p == transport::Poll::Done && recorder_)
                recorder_->note_sent(static_cast<uint8_t>(step.phase), step.bytes);
            return p == transport::Poll::Done;
        }
        case StepKind::RecvReduce:
        case StepKind::RecvCopy:
            // Only now has the work read the landed bytes: the slot goes back.
            transport_.release(step.peer);
            return true;
    }
    return false;
}

State Executor::advance()
{
    const auto &steps = schedule_.steps;
    if (transport_.failed()) {
        error_ = transport_.error();
        return State::Failed;
    }
    while (pc_ < steps.size()) {
        if (pc_ >= limit_) return State::Running;
        // A new stage (or the first): the flight recorder's stamp, one per change.
        if (pc_ == 0 || steps[pc_].phase != steps[pc_ - 1].phase) {
            if (noted_ != pc_ + 1) {
                noted_ = pc_ + 1;
                if (recorder_) recorder_->note_stage(static_cast<uint8_t>(steps[pc_].phase), steps[pc_].peer);
            }
        }
        bool failed = false;
        if (!run_step(steps[pc_], &failed)) return failed ? State::Failed : State::Running;
        ++pc_;
    }
    return transport_.sends_pending() ? State::Running : State::Done;
}

Status wait_until_unread(const ProgressLoop &loop, transport::PeerTransport &transport,
                         const std::vector<SourceRange> &ranges, const std::string &what)
{
    struct Unread : Task {
        transport::PeerTransport &transport;
        const std::vector<SourceRange> &ranges;
        const std::string &what;
        Unread(transport::PeerTransport &t, const std::vector<SourceRange> &r, const std::string &w)
            : transport(t), ranges(r), what(w)
        {}
        State advance() override
        {
            for (const SourceRange &r : ranges)
                if (transport.source_busy(r.ptr, r.bytes)) return State::Running;
            return State::Done;
        }
        uint64_t position() const override { return 0; }  // only completion counts
        std::string describe_wait() const override { return what; }
        std::string describe_failure() const override { return what; }
    } unread(transport, ranges, what);
    return loop.run(unread);
}

}  // namespace gpurdma::exec
