#include "exec/local_work.h"

#include <cstring>
#include <string>

#include "reduce/reduce.h"

namespace gpurdma::exec {

Status HostLocalWork::copy(void *dst, const void *src, size_t bytes)
{
    if (dst != src) std::memmove(dst, src, bytes);
    return Status::ok();
}

Status HostLocalWork::reduce(gpurdma_op_t op, gpurdma_dtype_t dtype, void *dst, const void *a, const void *b,
                             size_t count)
{
    const gpurdma_status_t st = reduce::apply(op, dtype, dst, a, b, count);
    if (st == GPURDMA_OK) return Status::ok();
    return Status::error(st, "host reduction of " + std::to_string(count) + " elements failed (status " +
                                 std::to_string(static_cast<int>(st)) + ")");
}

HostLocalWork &HostLocalWork::instance()
{
    static HostLocalWork work;
    return work;
}

}  // namespace gpurdma::exec
