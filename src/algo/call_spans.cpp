#include "algo/call_spans.h"

#include <cstring>

#include "reduce/reduce.h"

namespace gpurdma::algo {

using plan::Coll;

size_t part_count(const Call &call, int r)
{
    if (call.coll == Coll::ReduceScatter && !call.counts.empty()) return call.counts[static_cast<size_t>(r)];
    return call.count;
}

size_t total_count(const Call &call, int size)
{
    if (call.coll == Coll::Allgather) return call.count * static_cast<size_t>(size);
    if (call.coll != Coll::ReduceScatter) return call.count;
    if (call.counts.empty()) return call.count * static_cast<size_t>(size);
    size_t total = 0;
    for (size_t c : call.counts) total += c;
    return total;
}

size_t send_bytes(const Call &call, int size, int rank)
{
    (void)rank;
    if (call.in_place() || call.coll == Coll::Bcast) return 0;
    const size_t elem = reduce::dtype_size(call.dtype);
    if (call.coll == Coll::ReduceScatter) return total_count(call, size) * elem;
    return call.count * elem;
}

size_t recv_bytes(const Call &call, int size, int rank)
{
    const size_t elem = reduce::dtype_size(call.dtype);
    switch (call.coll) {
        case Coll::Allreduce:
        case Coll::Bcast: return call.count * elem;
        case Coll::Reduce: return rank == call.root ? call.count * elem : 0;
        case Coll::Allgather: return total_count(call, size) * elem;
        case Coll::ReduceScatter: return (call.in_place() ? total_count(call, size) : part_count(call, rank)) * elem;
    }
    return 0;
}

bool nothing_to_do(const Call &call, int size)
{
    return total_count(call, size) == 0;
}

void single_rank(const Call &call)
{
    if (call.in_place() || call.coll == Coll::Bcast) return;
    std::memmove(call.recvbuf, call.sendbuf, total_count(call, 1) * reduce::dtype_size(call.dtype));
}

plan::CollShape shape_of(const Call &call, int size)
{
    plan::CollShape s;
    s.coll = call.coll;
    s.elem = reduce::dtype_size(call.dtype);
    s.root = call.root;
    s.in_place = call.in_place();
    if (call.coll == Coll::ReduceScatter || call.coll == Coll::Allgather) {
        for (int r = 0; r < size; ++r) s.counts.push_back(part_count(call, r));
    } else {
        s.counts.push_back(call.count);
    }
    return s;
}

}  // namespace gpurdma::algo
