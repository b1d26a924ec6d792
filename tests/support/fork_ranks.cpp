#include "support/fork_ranks.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

namespace gpurdma::testing {

namespace {

constexpr size_t kSlotBytes = 256 * 1024;  // the largest record one allgather carries per rank

struct Shared {
    std::atomic<uint32_t> arrived;
    std::atomic<uint32_t> generation;
    std::atomic<uint32_t> failed;  // set by the parent when a rank is gone
    char data[1];  // size * kSlotBytes
};

struct Boot {
    Shared *shared;
    int rank;
    int size;
};

bool barrier(Boot *b)
{
    Shared *s = b->shared;
    const uint32_t gen = s->generation.load(std::memory_order_acquire);
    if (s->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<uint32_t>(b->size)) {
        s->arrived.store(0, std::memory_order_relaxed);
        s->generation.fetch_add(1, std::memory_order_acq_rel);
        return true;
    }
    while (s->generation.load(std::memory_order_acquire) == gen) {
        if (s->failed.load()) return false;  // a peer is gone: do not wait forever
        std::this_thread::yield();
    }
    return true;
}

int allgather(const void *send, void *recv, size_t bytes, void *arg)
{
    auto *b = static_cast<Boot *>(arg);
    if (bytes > kSlotBytes) return -1;
    std::memcpy(b->shared->data + static_cast<size_t>(b->rank) * kSlotBytes, send, bytes);
    if (!barrier(b)) return -1;
    for (int r = 0; r < b->size; ++r)
        std::memcpy(static_cast<char *>(recv) + static_cast<size_t>(r) * bytes,
                    b->shared->data + static_cast<size_t>(r) * kSlotBytes, bytes);
    return barrier(b) ? 0 : -1;
}

// A rank still running at the limit: its threads' stacks (gdb, where installed) before
// it is killed, so that a hang seen once, in CI, says where each thread waited.
void print_stacks(pid_t pid)
{
    if (access("/usr/bin/gdb", X_OK) != 0) return;
    const std::string cmd = "timeout 60 /usr/bin/gdb -p " + std::to_string(pid) +
                            " -batch -nx -q -ex 'thread apply all bt 24' 2>/dev/null | grep -E '^(Thread|#)' | "
                            "head -n 300 | sed 's/^/stack of pid " +
                            std::to_string(pid) + ": /'";
    std::fflush(nullptr);
    if (std::system(cmd.c_str()) != 0) std::printf("stack of pid %d: gdb could not attach\n", static_cast<int>(pid));
    std::fflush(nullptr);
}

}  // namespace

RankResult run_ranks(int size, const std::function<int(int, int, gpurdma_bootstrap_t)> &body, double timeout_s)
{
    RankResult result;
    const size_t bytes = sizeof(Shared) + static_cast<size_t>(size) * kSlotBytes;
    void *map = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
        result.failed = size;
        result.detail = "mmap failed";
        return result;
    }
    auto *shared = new (map) Shared();
    std::fflush(nullptr);  // no buffered output duplicated into the children
    std::vector<pid_t> pids;
    for (int r = 0; r < size; ++r) {
        const pid_t pid = fork();
        if (pid == 0) {
            Boot boot{shared, r, size};
            int rc = 1;
            try {
                rc = body(r, size, gpurdma_bootstrap_t{allgather, &boot});
            } catch (const std::exception &e) {
                std::fprintf(stderr, "rank %d: exception: %s\n", r, e.what());
            }
            std::fflush(nullptr);
            _exit(rc == 0 ? 0 : 1);
        }
        pids.push_back(pid);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    size_t left = pids.size();
    std::vector<bool> done(pids.size(), false);
    while (left > 0) {
        for (size_t i = 0; i < pids.size(); ++i) {
            int status = 0;
            if (done[i] || pids[i] <= 0 || waitpid(pids[i], &status, WNOHANG) != pids[i]) continue;
            done[i] = true;
            --left;
            const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
            if (ok) continue;
            ++result.failed;
            shared->failed.store(1);
            result.detail += (result.detail.empty() ? "" : "; ") + std::string("rank ") + std::to_string(i) +
                             (WIFSIGNALED(status) ? ": signal " + std::to_string(WTERMSIG(status))
                                                  : ": exit " + std::to_string(WEXITSTATUS(status)));
        }
        if (left > 0 && std::chrono::steady_clock::now() > deadline) {
            result.timed_out = true;
            for (size_t i = 0; i < pids.size(); ++i)
                if (!done[i] && pids[i] > 0) print_stacks(pids[i]);
            for (size_t i = 0; i < pids.size(); ++i)
                if (!done[i] && pids[i] > 0) kill(pids[i], SIGKILL);
            shared->failed.store(1);
        }
        if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    munmap(map, bytes);
    return result;
}

}  // namespace gpurdma::testing
