#include "exec/call_queue.h"

#include <algorithm>

namespace gpurdma::exec {

void CallQueue::conclude_ended()
{
    while (!ended_.empty()) {
        const Ended e = ended_.front();
        ended_.pop_front();
        owner_.ended(*e.call, e.state, e.result);
    }
}

int CallQueue::drive(bool reporting)
{
    int events = 0;
    yield_wanted_ = false;
    if (reporting && !ended_.empty()) {
        events += static_cast<int>(ended_.size());
        conclude_ended();
    }
    while (!queue_.empty()) {
        if (!reporting && !ended_.empty() && ended_.back().state != State::Done) return events;
        Queued &front = queue_.front();
        Status result;
        const ProgressLoop &loop = owner_.loop_of(*front.call);
        const State st = loop.step(*front.call, front.clock, &result);
        if (st == State::Running) {
            yield_wanted_ = events == 0 && loop.should_yield(front.clock);
            return events;
        }
        Task &call = *front.call;
        queue_.pop_front();
        ++events;
        if (!reporting) {
            ended_.push_back(Ended{&call, st, result});
            continue;
        }
        owner_.ended(call, st, result);
        if (!owner_.broken()) continue;
        while (!queue_.empty()) {
            Task &next = *queue_.front().call;
            queue_.pop_front();
            owner_.abort(next);
        }
    }
    return events;
}

void CallQueue::remove(Task &call)
{
    const auto it = std::find_if(queue_.begin(), queue_.end(), [&](const Queued &q) { return q.call == &call; });
    if (it != queue_.end()) queue_.erase(it);
}

int CallQueue::poll(bool report, bool *idle, bool *yield)
{
    if (!engine_.try_lock()) return 0;  // another thread drives it (and will again)
    const int events = drive(report);
    *idle = queue_.empty() && ended_.empty();
    *yield = yield_wanted_;
    engine_.unlock();
    return events;
}

}  // namespace gpurdma::exec
