// The allreduce algorithms as an enum, and their names in one table: how messages
// print each, the spellings coll_gpurdma_algorithm accepts, and a line of help (the
// shim's MCA enum for the parameter is built from the same table).
#pragma once

#include <cstddef>
#include <string>

namespace gpurdma::plan {

enum class Algorithm { Auto, Ring, RecursiveDoubling, Hierarchical, Node, HalvingDoubling };

struct AlgorithmInfo {
    Algorithm algorithm;
    const char *name;  // how messages print it: "recursive-doubling"
    const char *spellings[2];  // what the parameter accepts (nullptr: no second one)
    const char *help;
};

// Every algorithm once, in the order the parameter lists them; *count gets how many.
const AlgorithmInfo *algorithm_table(size_t *count);

// The spellings the parameter takes, by index: every algorithm's first ("auto", "node",
// "ring", "rd", "hier"), then the aliases ("recursive_doubling", "hierarchical");
// nullptr past the last (the shim's MCA enum is built from them).
const char *algorithm_spelling(size_t index);

// Any spelling of the table ("" is auto). False if the text names no algorithm.
bool parse_algorithm(const std::string &text, Algorithm *out);
const char *algorithm_name(Algorithm algorithm);

}  // namespace gpurdma::plan
