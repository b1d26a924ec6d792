// libFuzzer target: coll_gpurdma_logical_nodes parsing and the topology built from it.
// Input: first byte = number of ranks (1..64), second = number of distinct hosts
// (1..8), then the logical_nodes text. Any input must give a valid partition of the
// ranks (every rank in exactly one node, nodes non-empty, ordered by lowest rank,
// local ranks 0..n-1) or, for a bad text, a warning and one node per host.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "topo/topology.h"

#define CHECK(c)              \
    do {                      \
        if (!(c)) {           \
            __builtin_trap(); \
        }                     \
    } while (0)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    const int ranks = 1 + data[0] % 64;
    const int nhosts = 1 + data[1] % 8;
    const std::string text(reinterpret_cast<const char *>(data + 2), size - 2);

    std::vector<int> sizes;
    if (gpurdma::topo::parse_node_sizes(text, &sizes)) {
        CHECK(!sizes.empty());
        for (int s : sizes) CHECK(s > 0);
    }
    std::vector<std::string> hosts;
    for (int r = 0; r < ranks; ++r) hosts.push_back("host" + std::to_string((r * 7 + data[1]) % nhosts));
    std::string warning;
    const auto t = gpurdma::topo::build_topology(hosts, text, &warning);
    CHECK(t.size == ranks);
    CHECK(static_cast<int>(t.node_of.size()) == ranks && static_cast<int>(t.local_rank.size()) == ranks);
    CHECK(t.members.size() == t.node_names.size());
    std::vector<int> seen(static_cast<size_t>(ranks), 0);
    int prev_first = -1;
    for (size_t n = 0; n < t.members.size(); ++n) {
        CHECK(!t.members[n].empty());
        CHECK(t.members[n][0] > prev_first);
        prev_first = t.members[n][0];
        for (size_t i = 0; i < t.members[n].size(); ++i) {
            const int r = t.members[n][i];
            CHECK(r >= 0 && r < ranks);
            CHECK(i == 0 || r > t.members[n][i - 1]);
            ++seen[static_cast<size_t>(r)];
            CHECK(t.node_of[static_cast<size_t>(r)] == static_cast<int>(n));
            CHECK(t.local_rank[static_cast<size_t>(r)] == static_cast<int>(i));
            // All ranks of a node are on one host.
            CHECK(hosts[static_cast<size_t>(r)] == hosts[static_cast<size_t>(t.members[n][0])]);
        }
    }
    for (int c : seen) CHECK(c == 1);
    CHECK(t.max_ppn() >= t.min_ppn() && t.min_ppn() >= 1);
    (void)t.summary();
    if (!gpurdma::topo::parse_node_sizes(text, &sizes)) {
        // A malformed override is ignored: one node per host.
        CHECK(warning.empty() == text.empty());
        CHECK(t.nodes() <= nhosts);
    }
    return 0;
}
