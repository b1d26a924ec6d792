#include "exec/local_work.h"

#include <cstring>
#include <string>
#include <vector>

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

Status LocalWork::reduce_many(gpurdma_op_t op, gpurdma_dtype_t dtype, void *dst, const void *const *srcs, int n,
                              size_t count, size_t elem_size)
{
    const size_t bytes = count * elem_size;
    if (n <= 0) return Status::error(GPURDMA_ERR_INVALID, "a node reduction without sources");
    if (n == 1) return copy(dst, srcs[0], bytes);
    // A later source that is dst itself would be overwritten by the fold before it is
    // read: fold into a temporary then.
    bool aliased = false;
    for (int i = 2; i < n; ++i) aliased = aliased || srcs[i] == dst;
    std::vector<char> temporary(aliased ? bytes : 0);
    void *into = aliased ? temporary.data() : dst;
    Status st = reduce(op, dtype, into, srcs[0], srcs[1], count);
    for (int i = 2; i < n && st.is_ok(); ++i) st = reduce(op, dtype, into, into, srcs[i], count);
    if (st.is_ok() && aliased) st = copy(dst, into, bytes);
    return st;
}

HostLocalWork &HostLocalWork::instance()
{
    static HostLocalWork work;
    return work;
}

}  // namespace gpurdma::exec
