// Checks inside a forked rank (support/fork_ranks.h): gtest's assertions would only
// fail the child's copy of the test, so a rank counts its failed checks, says why on
// stderr, and returns non-zero; the parent asserts on run_ranks' RankResult.
#pragma once

#include <cstdio>
#include <string>

namespace gpurdma::testing {

class RankCheck {
public:
    explicit RankCheck(int rank) : rank_(rank) {}

    // Records a failure (with what was expected) when cond is false; returns cond.
    bool expect(bool cond, const std::string &what)
    {
        if (!cond) {
            ++failures_;
            std::fprintf(stderr, "rank %d: check failed: %s\n", rank_, what.c_str());
        }
        return cond;
    }
    bool equal(const std::string &got, const std::string &want, const std::string &what)
    {
        return expect(got == want, what + ": got \"" + got + "\", want \"" + want + "\"");
    }

    int failures() const { return failures_; }
    // What the rank's body returns: 0 when every check held.
    int result() const { return failures_ == 0 ? 0 : 1; }

private:
    int rank_;
    int failures_ = 0;
};

}  // namespace gpurdma::testing
