// The peers a rank may exchange messages with, as a pure function of (size, rank).
// Every rank can compute any other rank's set, which is how a sender finds its
// channel in the receiver's landing region without asking.
#pragma once

#include <vector>

namespace gpurdma::plan {

// Sorted ascending, without `rank` itself. Symmetric: b in neighbors(n, a) iff
// a in neighbors(n, b).
std::vector<int> neighbors(int size, int rank);

// Largest power of two <= size (size >= 1).
int power_of_two_floor(int size);

}  // namespace gpurdma::plan
