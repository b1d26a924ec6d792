// The live dump: on a signal (SIGUSR2 by default, chained to any handler installed
// before), when a trigger file appears or changes, or when a call times out, this
// process writes the flight recorders of all its communicators, with the call each
// one has in flight and where it waits, to one JSON file in the dump folder
// (<dir>/gpurdma-<host>-<pid>.json), without stopping the job. The signal handler
// only writes a byte to a pipe; a thread of this service (it never calls MPI) does the
// rest. tools: contrib/gpurdma-doctor reads the folder.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "obs/flight_recorder.h"

namespace gpurdma::obs {

struct DumpOptions {
    std::string dir;  // where dumps go (made 0700 if missing); "" = no dumps at all
    int signal = 0;  // 0: none
    std::string trigger;  // a file whose appearance (or new mtime) asks for a dump; "": none
    bool on_timeout = true;
};

class DumpService {
public:
    static DumpService &instance();

    // Each context's start and end (counted): the first start installs the handler and
    // starts the thread; the last end stops both and restores the previous handler.
    void start(const DumpOptions &options);
    void stop();

    // A communicator's recorder, between its creation and its release.
    void add(const FlightRecorder *recorder);
    void remove(const FlightRecorder *recorder);

    // Writes this process's dump now from the calling thread; returns the file's path,
    // or "" (no folder configured, or it could not be written: *why says so).
    std::string write(const char *reason, std::string *why = nullptr);
    // The same into `dir`.
    std::string write_to(const std::string &dir, const char *reason, std::string *why = nullptr);
    // A call's timeout, before its error is raised (if the options ask for it): the
    // file's path, or "".
    std::string write_on_timeout();

    // The JSON document (for tests): this process's recorders now.
    std::string document(const char *reason);

    // The dump thread's loop (its pipe and the trigger file).
    void watch();

private:
    DumpService() = default;
    void stop_thread();

    std::mutex lock_;  // the recorders, the options and the counts below
    std::vector<const FlightRecorder *> recorders_;
    DumpOptions options_;
    std::string watched_trigger_;  // the thread's copy, written before it starts
    int starts_ = 0;
    std::mutex write_lock_;  // one dump at a time
};

}  // namespace gpurdma::obs
