#include "plan/recursive_doubling.h"

#include "plan/neighbors.h"
#include "plan/planner.h"
#include "plan/step_helpers.h"

namespace gpurdma::plan {

using namespace detail;

void append_recursive_doubling(std::vector<Step> &steps, const Group &g, size_t first, size_t count, size_t elem)
{
    const int n = g.size();
    if (n < 2 || count == 0) return;
    const size_t off = first * elem, bytes = count * elem;
    const int p2 = power_of_two_floor(n);
    auto rank_of = [&g](int i) { return g.ranks[static_cast<size_t>(i)]; };
    if (g.me >= p2) {
        const int partner = rank_of(g.me - p2);
        steps.push_back(send(Phase::RdFoldIn, partner, Buf::Recv, off, bytes));
        steps.push_back(recv_copy(Phase::RdFoldOut, partner, off, bytes));
        return;
    }
    const bool has_extra = g.me + p2 < n;
    // The extra member is later in the group, so its contribution goes second.
    if (has_extra) steps.push_back(recv_reduce(Phase::RdFoldIn, rank_of(g.me + p2), false, Buf::Recv, off, bytes));
    for (int mask = 1; mask < p2; mask <<= 1) {
        const int partner = g.me ^ mask;
        steps.push_back(send(Phase::RdExchange, rank_of(partner), Buf::Recv, off, bytes));
        // The earlier member's value first, on both sides: both compute the same bits.
        steps.push_back(recv_reduce(Phase::RdExchange, rank_of(partner), partner < g.me, Buf::Recv, off, bytes));
    }
    if (has_extra) steps.push_back(send(Phase::RdFoldOut, rank_of(g.me + p2), Buf::Recv, off, bytes));
}

}  // namespace gpurdma::plan
