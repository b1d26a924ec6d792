// One file of the dump or the trace: its folder made (0700) if missing, the text written
// to <name>.part and renamed, so that a reader (gpurdma-doctor, a viewer) never sees half
// a file.
#pragma once

#include <string>

namespace gpurdma::obs {

// Returns dir/name, or "" with *why set.
std::string write_file(const std::string &dir, const std::string &name, const std::string &text, std::string *why);

}  // namespace gpurdma::obs
