// One unit of the hierarchical device path (a slice of one block, plan/rail.h) as a
// schedule, so that exec::Executor runs all of it, not only its rail:
//   the node reduce-scatter of the unit (a NodeReduce over the node members' send
//   buffers into this rank's receive buffer; a node of one has nothing to reduce);
//   where the host reduces the rail: the copy into the staging buffer, the rail steps
//   on it, the copy back into the receive buffer;
//   where the GPU does: the rail steps in place on the unit's span of the receive
//   buffer (a node of one copies its send buffer there first, unless in place).
// Which local work runs each step (the GPU's stream, the host) is the executor's.
#pragma once

#include <cstddef>

#include "plan/schedule.h"

namespace gpurdma::plan {

struct DeviceUnit {
    size_t first_byte = 0;  // the unit's offset in the user buffers
    size_t bytes = 0;
    bool node_reduce = true;  // false: a node of one rank
    bool stage_on_host = true;  // the rail runs on the staging buffer (the host reduces)
    bool in_place = false;  // the call's send buffer is its receive buffer
};

// Where a unit schedule's rail steps are: [rail_begin, rail_end).
struct UnitSpan {
    size_t rail_begin = 0;
    size_t rail_end = 0;
};

// rail: the rail allreduce of the unit's slice (build_rail_allreduce: in place on
// Recv from offset 0); may be empty (no rail peer).
Schedule build_device_unit(const Schedule &rail, const DeviceUnit &unit, UnitSpan *span);

}  // namespace gpurdma::plan
