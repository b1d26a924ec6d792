#include "plan/algorithms.h"

namespace gpurdma::plan {

namespace {

// In the order the parameter lists them (auto, node, ring, rd, hier, rhd).
const AlgorithmInfo kTable[] = {
    {Algorithm::Auto,
     "auto",
     {"auto", nullptr},
     "the cost model's choice per message size; one node: the node allreduce"},
    {Algorithm::Node,
     "node",
     {"node", nullptr},
     "the one-node shared-memory allreduce; auto where the ranks span nodes"},
    {Algorithm::Ring, "ring", {"ring", nullptr}, "ring reduce-scatter + allgather over all ranks"},
    {Algorithm::RecursiveDoubling,
     "recursive-doubling",
     {"rd", "recursive_doubling"},
     "recursive doubling for messages that fit a landing slot, the ring above"},
    {Algorithm::Hierarchical,
     "hierarchical",
     {"hier", "hierarchical"},
     "node reduce-scatter, one rail per slice between nodes, node allgather"},
    {Algorithm::HalvingDoubling,
     "halving-doubling",
     {"rhd", "halving_doubling"},
     "Rabenseifner's recursive-halving reduce-scatter and recursive-doubling allgather over all ranks"},
};

constexpr size_t kCount = sizeof kTable / sizeof kTable[0];

}  // namespace

const AlgorithmInfo *algorithm_table(size_t *count)
{
    *count = kCount;
    return kTable;
}

const char *algorithm_spelling(size_t index)
{
    for (size_t which = 0; which < 2; ++which)
        for (const AlgorithmInfo &a : kTable) {
            if (!a.spellings[which]) continue;
            if (index == 0) return a.spellings[which];
            --index;
        }
    return nullptr;
}

bool parse_algorithm(const std::string &text, Algorithm *out)
{
    if (text.empty()) {
        *out = Algorithm::Auto;
        return true;
    }
    for (const AlgorithmInfo &a : kTable)
        for (const char *spelling : a.spellings)
            if (spelling && text == spelling) {
                *out = a.algorithm;
                return true;
            }
    return false;
}

const char *algorithm_name(Algorithm algorithm)
{
    for (const AlgorithmInfo &a : kTable)
        if (a.algorithm == algorithm) return a.name;
    return "unknown";
}

}  // namespace gpurdma::plan
