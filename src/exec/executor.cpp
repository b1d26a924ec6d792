#include "exec/executor.h"

#include <cstring>

#include "reduce/reduce.h"

namespace gpurdma::exec {

using plan::Buf;
using plan::Step;
using plan::StepKind;

Executor::Executor(const plan::Schedule &schedule, transport::PeerTransport &transport, gpurdma_op_t op,
                   gpurdma_dtype_t dtype, const void *sendbuf, void *recvbuf)
    : schedule_(schedule),
      transport_(transport),
      op_(op),
      dtype_(dtype),
      send_(static_cast<const char *>(sendbuf ? sendbuf : recvbuf)),
      recv_(static_cast<char *>(recvbuf))
{}

const Step *Executor::current() const
{
    return pc_ < schedule_.steps.size() ? &schedule_.steps[pc_] : nullptr;
}

const void *Executor::source(Buf buf, size_t off) const
{
    return (buf == Buf::Send ? send_ : recv_) + off;
}

void *Executor::destination(Buf buf, size_t off) const
{
    // Nothing writes the send buffer: only the receive buffer is ours to change.
    (void)buf;
    return recv_ + off;
}

bool Executor::run_step(const Step &step, bool *failed)
{
    switch (step.kind) {
        case StepKind::Copy: {
            void *dst = destination(step.dst_buf, step.dst_off);
            const void *src = source(step.src_buf, step.src_off);
            if (transport_.source_busy(dst, step.bytes)) return false;
            if (dst != src) std::memmove(dst, src, step.bytes);
            return true;
        }
        case StepKind::Send: {
            const transport::Poll p = transport_.try_send(step.peer, source(step.src_buf, step.src_off), step.bytes);
            if (p == transport::Poll::Failed) {
                *failed = true;
                error_ = transport_.error();
            }
            return p == transport::Poll::Done;
        }
        case StepKind::RecvReduce:
        case StepKind::RecvCopy: {
            void *dst = destination(step.dst_buf, step.dst_off);
            // A send may still be reading the bytes we are about to overwrite.
            if (transport_.source_busy(dst, step.bytes)) return false;
            const void *landed = transport_.try_receive(step.peer, step.bytes);
            if (!landed) return false;
            if (step.kind == StepKind::RecvCopy) {
                std::memcpy(dst, landed, step.bytes);
            } else {
                const void *local = source(step.src_buf, step.src_off);
                const void *a = step.landed_first ? landed : local;
                const void *b = step.landed_first ? local : landed;
                reduce::apply(op_, dtype_, dst, a, b, step.bytes / schedule_.elem_size);
            }
            transport_.release(step.peer);
            return true;
        }
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
