#include "plan/collective.h"

#include <tuple>

namespace gpurdma::plan {

const char *coll_name(Coll coll)
{
    switch (coll) {
        case Coll::Allreduce: return "allreduce";
        case Coll::ReduceScatter: return "reduce-scatter";
        case Coll::Allgather: return "allgather";
        case Coll::Bcast: return "bcast";
        case Coll::Reduce: return "reduce";
    }
    return "?";
}

bool CollShape::operator<(const CollShape &o) const
{
    return std::tie(coll, elem, counts, root, in_place) < std::tie(o.coll, o.elem, o.counts, o.root, o.in_place);
}

}  // namespace gpurdma::plan
