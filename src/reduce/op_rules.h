// The MPI standard's table of valid (op, type group) pairs for C types, in one place
// for the host kernels (type_map.h) and the device kernels (reduce_device.h, which
// nvcc compiles too: constexpr only).
#ifndef GPURDMA_REDUCE_OP_RULES_H
#define GPURDMA_REDUCE_OP_RULES_H

#include "gpurdma/gpurdma.h"

namespace gpurdma::reduce {

// What the MPI standard groups C types into for the purpose of valid ops (None: a
// type a kernel family does not take at all).
enum class Kind { Integer, Floating, Logical, Byte, Complex, Pair, None };

constexpr bool valid_op(gpurdma_op_t op, Kind kind)
{
    const bool arith = op == GPURDMA_SUM || op == GPURDMA_PROD;
    const bool minmax = op == GPURDMA_MIN || op == GPURDMA_MAX;
    const bool logical = op == GPURDMA_LAND || op == GPURDMA_LOR || op == GPURDMA_LXOR;
    const bool bitwise = op == GPURDMA_BAND || op == GPURDMA_BOR || op == GPURDMA_BXOR;
    const bool loc = op == GPURDMA_MAXLOC || op == GPURDMA_MINLOC;
    switch (kind) {
        case Kind::Integer: return arith || minmax || logical || bitwise;
        case Kind::Floating: return arith || minmax;
        case Kind::Logical: return logical;
        case Kind::Byte: return bitwise;
        case Kind::Complex: return arith;
        case Kind::Pair: return loc;
        case Kind::None: return false;
    }
    return false;
}

}  // namespace gpurdma::reduce

#endif  // GPURDMA_REDUCE_OP_RULES_H
