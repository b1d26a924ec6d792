// What a call's buffers hold, by collective (algo::Call's comment has the layouts): the
// bytes each buffer spans on this rank, whether there is anything to do at all, and a
// single rank's result. Host staging, the size-1 path and the schedules share these.
#pragma once

#include <cstddef>

#include "algo/algorithm.h"
#include "plan/collective.h"

namespace gpurdma::algo {

// Elements of rank r's part: ReduceScatter's result, Allgather's block; the message otherwise.
size_t part_count(const Call &call, int r);
// Elements of the whole vector: ReduceScatter's input, Allgather's result; the message otherwise.
size_t total_count(const Call &call, int size);
// Byte spans this rank's send and receive buffers hold (in place: send 0, and the receive
// span covers the input too). Reduce's receive span is 0 off the root.
size_t send_bytes(const Call &call, int size, int rank);
size_t recv_bytes(const Call &call, int size, int rank);
// True when the call moves nothing on any rank (the same answer on every rank).
bool nothing_to_do(const Call &call, int size);
// A communicator of one rank: its own data is the result.
void single_rank(const Call &call);
// The shape every rank builds its schedule from.
plan::CollShape shape_of(const Call &call, int size);

}  // namespace gpurdma::algo
