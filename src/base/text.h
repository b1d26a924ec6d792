// Small text helpers shared by every layer's messages.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

namespace gpurdma {

// "256 KiB", "1 MiB", "100 B": exact units only.
inline std::string format_bytes(size_t bytes)
{
    char text[64];
    if (bytes >= (size_t{1} << 20) && bytes % (size_t{1} << 20) == 0)
        std::snprintf(text, sizeof text, "%zu MiB", bytes >> 20);
    else if (bytes >= 1024 && bytes % 1024 == 0) std::snprintf(text, sizeof text, "%zu KiB", bytes >> 10);
    else std::snprintf(text, sizeof text, "%zu B", bytes);
    return text;
}

// How every message names a peer: "rank 3 on host b" (the host once it is known).
inline std::string describe_rank(int rank, const std::vector<std::string> &hosts)
{
    std::string text = "rank " + std::to_string(rank);
    if (rank >= 0 && static_cast<size_t>(rank) < hosts.size()) text += " on host " + hosts[static_cast<size_t>(rank)];
    return text;
}

}  // namespace gpurdma
