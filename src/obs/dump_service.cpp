#include "obs/dump_service.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gpurdma/gpurdma.h"
#include "obs/file_write.h"
#include "obs/json.h"
#include "obs/process_id.h"
#include "obs/ticks.h"
#include "plan/collective.h"
#include "plan/schedule.h"

namespace gpurdma::obs {

namespace {

// The thread, its pipe and the handler it replaced: plain globals, because the signal
// handler reads them.
int g_pipe[2] = {-1, -1};
pthread_t g_thread;
pid_t g_owner = 0;  // the process that started the thread (a forked child has none)
int g_signal = 0;
struct sigaction g_previous;

void on_signal(int sig, siginfo_t *info, void *context)
{
    const int saved = errno;
    if (g_pipe[1] >= 0) {
        const char byte = 's';
        (void)!::write(g_pipe[1], &byte, 1);
    }
    errno = saved;
    if (g_previous.sa_flags & SA_SIGINFO) {
        if (g_previous.sa_sigaction) g_previous.sa_sigaction(sig, info, context);
    } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN && g_previous.sa_handler) {
        g_previous.sa_handler(sig);
    }
}

const TickClock &tick_clock()
{
    return TickClock::process();
}

void *watch_thread(void *)
{
    DumpService::instance().watch();
    return nullptr;
}

const char *state_name(CallState s)
{
    switch (s) {
        case CallState::InFlight: return "in flight";
        case CallState::Done: return "done";
        case CallState::Failed: return "failed";
        case CallState::Declined: return "declined";
        case CallState::Empty: break;
    }
    return "empty";
}

const char *path_name(uint8_t p)
{
    switch (static_cast<RecorderPath>(p)) {
        case RecorderPath::Host: return "host";
        case RecorderPath::Device: return "device";
        case RecorderPath::Staged: return "staged";
        case RecorderPath::Unknown: break;
    }
    return "";
}

const char *kind_name(uint8_t k)
{
    return k == 1 ? "nonblocking" : k == 2 ? "persistent" : "blocking";
}

bool reduces(const CallRecord &r)
{
    const auto coll = static_cast<plan::Coll>(r.coll);
    return !r.barrier && coll != plan::Coll::Allgather && coll != plan::Coll::Bcast;
}

std::string call_json(const CallRecord &r, const TickClock &clock)
{
    std::string j =
        "{\"seq\": " + std::to_string(r.seq) +
        ", \"collective\": " + json_text(r.barrier ? "barrier" : plan::coll_name(static_cast<plan::Coll>(r.coll))) +
        ", \"count\": " + std::to_string(r.count) + ", \"bytes\": " + std::to_string(r.bytes) +
        ", \"datatype\": " + json_text(gpurdma_dtype_name(static_cast<gpurdma_dtype_t>(r.dtype))) + ", \"op\": " +
        (reduces(r) ? json_text(gpurdma_op_name(static_cast<gpurdma_op_t>(r.op))) : std::string("null")) +
        ", \"root\": " + std::to_string(r.root) + ", \"kind\": " + json_text(kind_name(r.kind)) +
        ", \"path\": " + json_text(path_name(r.path)) + ", \"state\": " + json_text(state_name(r.state)) +
        ", \"start\": " + json_number(clock.unix_seconds(r.begin));
    if (r.end) j += ", \"end\": " + json_number(clock.unix_seconds(r.end));
    j += ", \"stages\": [";
    for (int i = 0; i < r.stages && i < CallRecord::kStages; ++i) {
        const StageSpan &s = r.stage[i];
        if (i) j += ", ";
        j += "{\"stage\": " + json_text(plan::phase_name(static_cast<plan::Phase>(s.phase))) +
             ", \"peer\": " + std::to_string(s.peer) + ", \"bytes_sent\": " + std::to_string(s.bytes) +
             ", \"start\": " + json_number(clock.unix_seconds(s.begin));
        if (s.end) j += ", \"end\": " + json_number(clock.unix_seconds(s.end));
        j += "}";
    }
    return j + "]}";
}

}  // namespace

const TickClock &TickClock::process()
{
    static const TickClock clock;
    return clock;
}

DumpService &DumpService::instance()
{
    static DumpService *service = new DumpService();  // never destroyed: the handler may outlive exit
    return *service;
}

void DumpService::start(const DumpOptions &options)
{
    std::lock_guard<std::mutex> hold(lock_);
    (void)tick_clock();  // the tick anchor, as early as possible
    if (starts_++ > 0 && g_owner == getpid()) return;
    if (g_owner != 0 && g_owner != getpid()) {
        // A forked child: the parent's thread and pipe are not ours.
        g_pipe[0] = g_pipe[1] = -1;
        g_owner = 0;
        starts_ = 1;
    }
    options_ = options;
    if (options_.dir.empty() || (options_.signal == 0 && options_.trigger.empty())) return;
    if (pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        g_pipe[0] = g_pipe[1] = -1;
        return;
    }
    watched_trigger_ = options_.trigger;
    // The thread gets no signals: the application's threads keep theirs.
    sigset_t all, before;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &before);
    const int made = pthread_create(&g_thread, nullptr, watch_thread, nullptr);
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
    if (made != 0) {
        close(g_pipe[0]);
        close(g_pipe[1]);
        g_pipe[0] = g_pipe[1] = -1;
        return;
    }
    g_owner = getpid();
    if (options_.signal > 0) {
        struct sigaction mine {};
        mine.sa_sigaction = on_signal;
        mine.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&mine.sa_mask);
        if (sigaction(options_.signal, &mine, &g_previous) == 0) g_signal = options_.signal;
    }
}

void DumpService::stop()
{
    {
        std::lock_guard<std::mutex> hold(lock_);
        if (starts_ == 0 || --starts_ > 0) return;
        if (g_owner != getpid()) return;
    }
    // Not under lock_: the thread takes it to write a dump, and is joined here.
    stop_thread();
}

void DumpService::stop_thread()
{
    if (g_signal) {
        struct sigaction now {};
        // Only our own handler is taken back: one installed after it stays.
        if (sigaction(g_signal, nullptr, &now) == 0 && (now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_signal)
            (void)sigaction(g_signal, &g_previous, nullptr);
        g_signal = 0;
    }
    const char quit = 'q';
    (void)!::write(g_pipe[1], &quit, 1);
    pthread_join(g_thread, nullptr);
    close(g_pipe[0]);
    close(g_pipe[1]);
    g_pipe[0] = g_pipe[1] = -1;
    g_owner = 0;
}

void DumpService::watch()
{
    const std::string trigger = watched_trigger_;  // set before the thread started
    // A trigger file already there at the start is not a request: only a new one (or a
    // new modification time) is.
    struct stat st {};
    timespec seen{};
    if (!trigger.empty() && stat(trigger.c_str(), &st) == 0) seen = st.st_mtim;
    for (;;) {
        pollfd p{g_pipe[0], POLLIN, 0};
        const int ready = poll(&p, 1, trigger.empty() ? -1 : 500);
        if (ready > 0) {
            char bytes[64];
            const ssize_t n = read(g_pipe[0], bytes, sizeof bytes);
            if (n > 0 && std::memchr(bytes, 'q', static_cast<size_t>(n))) return;
            if (n > 0) (void)this->write("signal");
            continue;
        }
        if (ready < 0 && errno != EINTR) return;
        if (!trigger.empty() && stat(trigger.c_str(), &st) == 0 &&
            (st.st_mtim.tv_sec != seen.tv_sec || st.st_mtim.tv_nsec != seen.tv_nsec)) {
            seen = st.st_mtim;
            (void)this->write("trigger file");
        }
    }
}

void DumpService::add(const FlightRecorder *recorder)
{
    std::lock_guard<std::mutex> hold(lock_);
    recorders_.push_back(recorder);
}

void DumpService::remove(const FlightRecorder *recorder)
{
    std::lock_guard<std::mutex> hold(lock_);
    for (size_t i = 0; i < recorders_.size(); ++i)
        if (recorders_[i] == recorder) {
            recorders_.erase(recorders_.begin() + static_cast<long>(i));
            return;
        }
}

std::string DumpService::document(const char *reason)
{
    const TickClock &clock = tick_clock();
    std::string j = "{\n  \"format\": \"gpurdma-dump 1\",\n  \"reason\": " + json_text(reason) +
                    ",\n  \"time\": " + json_number(TickClock::unix_now()) +
                    ",\n  \"host\": " + json_text(host_name()) + ",\n  \"pid\": " + std::to_string(getpid()) +
                    ",\n  \"job\": " + json_text(job_text()) + ",\n  \"world_rank\": " + json_text(world_rank_text()) +
                    ",\n  \"world_size\": " + json_text(world_size_text()) + ",\n  \"communicators\": [";
    std::lock_guard<std::mutex> hold(lock_);
    bool first = true;
    for (const FlightRecorder *recorder : recorders_) {
        const FlightRecorder::Snapshot s = recorder->snapshot();
        j += first ? "\n" : ",\n";
        first = false;
        j += "    {\"name\": " + json_text(s.name) + ", \"rank\": " + std::to_string(s.rank) +
             ", \"size\": " + std::to_string(s.size) + ", \"calls_begun\": " + std::to_string(s.calls_begun) +
             ", \"history\": " + (s.history ? "true" : "false") + ", \"hosts\": [";
        for (size_t i = 0; i < s.hosts.size(); ++i) j += (i ? ", " : "") + json_text(s.hosts[i]);
        j += "], \"broken\": " + json_text(s.broken) + ",\n     \"waiting\": ";
        if (s.waiting_seq)
            j += "{\"seq\": " + std::to_string(s.waiting_seq) + ", \"in\": " + json_text(s.waiting_in) +
                 ", \"idle_s\": " + json_number(s.waiting_idle_s) + "}";
        else j += "null";
        j += ",\n     \"calls\": [";
        for (size_t i = 0; i < s.calls.size(); ++i)
            j += (i ? ",\n       " : "\n       ") + call_json(s.calls[i], clock);
        j += "]}";
    }
    return j + "\n  ]\n}\n";
}

std::string DumpService::write(const char *reason, std::string *why)
{
    std::string dir;
    {
        std::lock_guard<std::mutex> hold(lock_);
        dir = options_.dir;
    }
    return write_to(dir, reason, why);
}

std::string DumpService::write_to(const std::string &dir, const char *reason, std::string *why)
{
    if (dir.empty()) {
        if (why) *why = "no dump folder (coll_gpurdma_dump_dir)";
        return "";
    }
    std::lock_guard<std::mutex> one(write_lock_);
    return write_file(dir, "gpurdma-" + host_name() + "-" + std::to_string(getpid()) + ".json", document(reason), why);
}

std::string DumpService::write_on_timeout()
{
    {
        std::lock_guard<std::mutex> hold(lock_);
        if (!options_.on_timeout) return "";
    }
    return write("timeout");
}

}  // namespace gpurdma::obs
