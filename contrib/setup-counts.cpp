// What one communicator's set-up costs each rank as the job grows, counted from the
// schedules (no launch): the set-up's allgathers and their bytes, the UCX endpoints
// (peers on other nodes that some schedule uses: plan::peers), the node peers, and the
// landing memory the channels to those peers take (docs/PERFORMANCE.md, "Set-up").
//
//   contrib/setup-counts [ranks-per-node]      (default 8; jobs of 8 .. 4096 ranks)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "algo/rail_admission.h"
#include "plan/planner.h"
#include "setup/agreement.h"
#include "topo/topology.h"
#include "transport/channel_layout.h"

using namespace gpurdma;

int main(int argc, char **argv)
{
    const int ppn = argc > 1 ? std::max(1, std::atoi(argv[1])) : 8;
    const int slots = 4;  // coll_gpurdma_slots and chunk_size at their defaults
    const size_t chunk = 256 * 1024;
    // The set-up's rounds: placement and media records in blocks of kBlockBytes (both
    // fit: 199 and 332 bytes measured at 2 logical nodes), then the vote's 4 bytes.
    const double block = setup::Agreement::kBlockBytes, vote = 4;
    std::printf("%d ranks per node, slots %d, chunk %zu KiB\n", ppn, slots, chunk >> 10);
    std::printf("| ranks | nodes | allgathers | bytes received per rank | messages per rank (Bruck or "
                "recursive doubling / ring) | UCX endpoints per rank (max, mean) | node peers | landing per rank "
                "(max) |\n|---|---|---|---|---|---|---|---|\n");
    for (int ranks : {8, 64, 512, 4096}) {
        std::vector<std::string> nodes(static_cast<size_t>(ranks));
        for (int r = 0; r < ranks; ++r) nodes[static_cast<size_t>(r)] = "n" + std::to_string(r / ppn);
        const topo::Topology t = topo::build_topology(nodes);
        const int rail_slots = algo::rail_slots_for(0, slots, chunk, t.nodes());
        size_t most = 0, total = 0;
        for (int r = 0; r < ranks; ++r) {
            size_t remote = 0;
            for (int p : plan::peers(t, r))
                remote += t.node_of[static_cast<size_t>(p)] != t.node_of[static_cast<size_t>(r)] ? 1 : 0;
            most = std::max(most, remote);
            total += remote;
        }
        transport::ChannelLayout landing;
        landing.neighbors = static_cast<int>(most);
        landing.slots = rail_slots;
        landing.slot_size = chunk;
        const double received = (ranks - 1) * (2 * block + vote);
        const int log_rounds = static_cast<int>(std::ceil(std::log2(ranks)));
        std::printf("| %d | %d | 3 | %.0f KiB | %d / %d | %zu, %.1f | %d | %.1f MiB |\n", ranks, t.nodes(),
                    received / 1024, 3 * log_rounds, 3 * (ranks - 1), most, static_cast<double>(total) / ranks,
                    ppn - 1, t.nodes() > 1 ? landing.bytes() / 1048576.0 : 0.0);
    }
    return 0;
}
