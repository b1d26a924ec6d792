#include "plan/neighbors.h"

#include <algorithm>

namespace gpurdma::plan {

int power_of_two_floor(int size)
{
    int p = 1;
    while (p * 2 <= size) p *= 2;
    return p;
}

std::vector<int> neighbors(int size, int rank)
{
    std::vector<int> peers;
    if (size < 2) return peers;
    // ring
    peers.push_back((rank + size - 1) % size);
    peers.push_back((rank + 1) % size);
    // recursive doubling among the first p2 ranks, the others fold into rank - p2
    const int p2 = power_of_two_floor(size);
    if (rank >= p2) {
        peers.push_back(rank - p2);
    } else {
        for (int mask = 1; mask < p2; mask <<= 1) peers.push_back(rank ^ mask);
        if (rank + p2 < size) peers.push_back(rank + p2);
    }
    std::sort(peers.begin(), peers.end());
    peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
    peers.erase(std::remove(peers.begin(), peers.end(), rank), peers.end());
    return peers;
}

}  // namespace gpurdma::plan
