// printf-style messages routed to the caller's log callback (the shim prints them
// with opal_output). Level 0 is always printed: errors and warnings.
#pragma once

#include <cstdarg>
#include <cstdio>

#include "gpurdma/gpurdma.h"

namespace gpurdma {

class Logger {
public:
    Logger(gpurdma_log_fn_t fn, int verbose) : fn_(fn), verbose_(verbose) {}
    bool enabled(int level) const { return level <= 0 || level <= verbose_; }

    __attribute__((format(printf, 3, 4))) void log(int level, const char *fmt, ...) const
    {
        if (!enabled(level)) return;
        char text[2048];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof text, fmt, ap);
        va_end(ap);
        if (fn_) fn_(level, text);
        else std::fprintf(stderr, "gpurdma: %s\n", text);
    }

private:
    gpurdma_log_fn_t fn_;
    int verbose_;
};

}  // namespace gpurdma
