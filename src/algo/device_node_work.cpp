#include "algo/device_node_work.h"

#include <algorithm>

#include "algo/call_spans.h"
#include "reduce/reduce.h"

namespace gpurdma::algo {

using plan::Coll;

namespace {

// Elements before rank r's part of a reduce-scatter input (or allgather result).
size_t part_offset(const Call &call, int r)
{
    size_t offset = 0;
    for (int q = 0; q < r; ++q) offset += part_count(call, q);
    return offset;
}

}  // namespace

BufferSides used_sides(const Call &call, int rank)
{
    switch (call.coll) {
        case Coll::Bcast: return {false, true};
        case Coll::Reduce: return {true, rank == call.root};
        default: return {true, true};
    }
}

BufferSides shared_sides(const Call &call, int rank)
{
    switch (call.coll) {
        case Coll::Allreduce: return {true, true};
        case Coll::ReduceScatter:
        case Coll::Allgather: return {true, false};
        case Coll::Bcast: return {rank == call.root, false};
        case Coll::Reduce: return {true, rank == call.root};
    }
    return {};
}

size_t device_node_scratch(const Call &call, int rank)
{
    if (call.coll != Coll::ReduceScatter || !call.in_place() || part_offset(call, rank) == 0) return 0;
    return part_count(call, rank) * reduce::dtype_size(call.dtype);
}

void device_slice(size_t count, size_t elem, int size, int r, size_t *lo, size_t *hi)
{
    const size_t align = std::max<size_t>(1, 64 / elem), ranks = static_cast<size_t>(size);
    const size_t per_rank = ((count + ranks - 1) / ranks + align - 1) / align * align;
    *lo = std::min(count, per_rank * static_cast<size_t>(r));
    *hi = std::min(count, per_rank * static_cast<size_t>(r) + per_rank);
}

DeviceNodeWork device_node_work(const Call &call, int size, int rank, const std::vector<const char *> &srcs,
                                const std::vector<char *> &dsts, char *scratch)
{
    const size_t elem = reduce::dtype_size(call.dtype);
    const auto me = static_cast<size_t>(rank);
    DeviceNodeWork work;
    // Element `offset` of every rank's input.
    auto inputs_at = [&](size_t offset) {
        std::vector<const void *> in(srcs.size());
        for (size_t q = 0; q < in.size(); ++q) in[q] = srcs[q] + offset * elem;
        return in;
    };
    auto reduce_into = [&](char *dst, size_t offset, size_t count) {
        if (count > 0) work.reductions.push_back({dst, inputs_at(offset), count});
    };
    auto copy = [&](char *dst, const char *src, size_t count) {
        if (count > 0 && dst != src) work.copies.push_back({dst, src, count * elem});
    };
    switch (call.coll) {
        case Coll::Allreduce: {
            size_t lo = 0, hi = 0;
            device_slice(call.count, elem, size, rank, &lo, &hi);
            reduce_into(dsts[me] + lo * elem, lo, hi - lo);
            work.barrier = true;
            for (int r = 0; r < size; ++r) {
                if (r == rank) continue;
                device_slice(call.count, elem, size, r, &lo, &hi);
                copy(dsts[me] + lo * elem, dsts[static_cast<size_t>(r)] + lo * elem, hi - lo);
            }
            break;
        }
        case Coll::ReduceScatter: {
            const size_t offset = part_offset(call, rank), count = part_count(call, rank);
            if (!call.in_place()) {
                reduce_into(dsts[me], offset, count);
                break;
            }
            // In place: the front of this rank's buffer is input that peers read (unless its
            // part is there): the result waits in scratch memory until they are done.
            if (offset == 0) {
                reduce_into(dsts[me], offset, count);
                break;
            }
            reduce_into(scratch, offset, count);
            work.barrier = true;
            copy(dsts[me], scratch, count);
            break;
        }
        case Coll::Allgather:
            for (int r = 0; r < size; ++r) {
                const size_t offset = static_cast<size_t>(r) * call.count;
                const char *block = srcs[static_cast<size_t>(r)] + (call.in_place() ? offset * elem : 0);
                copy(dsts[me] + offset * elem, block, call.count);
            }
            break;
        case Coll::Bcast:
            if (rank != call.root) copy(dsts[me], srcs[static_cast<size_t>(call.root)], call.count);
            break;
        case Coll::Reduce: {
            size_t lo = 0, hi = 0;
            device_slice(call.count, elem, size, rank, &lo, &hi);
            reduce_into(dsts[static_cast<size_t>(call.root)] + lo * elem, lo, hi - lo);
            break;
        }
    }
    return work;
}

}  // namespace gpurdma::algo
