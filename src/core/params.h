// gpurdma's parameters as one table (src/core/params.cpp: name, type, default, range,
// help, MCA info level, whether every rank must agree, where it lives in
// gpurdma_config_t). It drives the defaults and validation (config.cpp), the set-up
// agreement (below), the MCA registration in the shim (through the C API in
// gpurdma.h) and the README's parameter table check (contrib/check-readme-params.sh).
// Adding a parameter: a row in the table, its gpurdma_config_t field, its README row
// (the check fails until it is there), and whatever code reads the value.
#pragma once

#include <cstddef>
#include <string>

#include "base/status.h"
#include "gpurdma/gpurdma.h"
#include "setup/wire.h"

namespace gpurdma::params {

size_t count();
const gpurdma_param_info_t &row(size_t index);

// The field a row describes, typed by the caller (the row's type says which type).
template <typename T> T &field(gpurdma_config_t &config, const gpurdma_param_info_t &p)
{
    return *reinterpret_cast<T *>(reinterpret_cast<char *>(&config) + p.offset);
}
template <typename T> const T &field(const gpurdma_config_t &config, const gpurdma_param_info_t &p)
{
    return *reinterpret_cast<const T *>(reinterpret_cast<const char *>(&config) + p.offset);
}

// Whether every parameter is within its row's range and the rules between them hold:
// GPURDMA_ERR_INVALID naming the first that is not ("coll_gpurdma_slots=0 is not in
// 1..64"). Unlike gpurdma_config_validate, nothing is replaced or printed.
Status check_config(const gpurdma_config_t &config);

// The values every rank of a communicator must share (they shape the plan), appended
// to this rank's set-up record.
void write_agreed(wire::Writer &record, const gpurdma_config_t &config);

// Reads a peer's agreed values. Returns false if the record is unreadable; otherwise
// *differing is "" when they equal ours, else the parameter names that differ
// ("chunk_size, slots").
bool compare_agreed(wire::Reader &record, const gpurdma_config_t &config, std::string *differing);

}  // namespace gpurdma::params
