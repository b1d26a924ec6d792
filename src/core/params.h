// gpurdma's parameters as one table (name, type, default, range, help, whether every
// rank must agree): it drives the MCA registration in the shim, validation, defaults,
// the set-up agreement and the README's parameter table check. Adding a parameter
// touches this table and the gpurdma_config_t field it fills.
#pragma once

#include <string>

#include "gpurdma/gpurdma.h"
#include "setup/wire.h"

namespace gpurdma::params {

// The values every rank of a communicator must share (they shape the plan), appended
// to this rank's set-up record.
void write_agreed(wire::Writer &record, const gpurdma_config_t &config);

// Reads a peer's agreed values. Returns false if the record is unreadable; otherwise
// *differing is "" when they equal ours, else the parameter names that differ
// ("chunk_size, slots").
bool compare_agreed(wire::Reader &record, const gpurdma_config_t &config, std::string *differing);

}  // namespace gpurdma::params
