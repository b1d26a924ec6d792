/*
 * Output: stderr, one line per message, "[host:pid rank R] pmpi:gpurdma: <message>".
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pmpi/interposer.h"

static int verbose;
static int world_rank = -1;

void pmpi_set_verbose(int level)
{
    verbose = level;
}

void pmpi_set_rank(int rank)
{
    world_rank = rank;
}

/* The core names its parameters as Open MPI's (coll_gpurdma_slots); here they are
 * environment variables (GPURDMA_SLOTS). */
static void environment_names(const char *in, char *out, size_t size)
{
    static const char core_prefix[] = "coll_gpurdma_";
    size_t n = 0;
    while (*in && n + 1 < size) {
        if (0 == strncmp(in, core_prefix, sizeof core_prefix - 1)) {
            in += sizeof core_prefix - 1;
            const char *env_prefix = "GPURDMA_";
            while (*env_prefix && n + 1 < size) out[n++] = *env_prefix++;
            while ((islower((unsigned char)*in) || isdigit((unsigned char)*in) || *in == '_') && n + 1 < size)
                out[n++] = (char)toupper((unsigned char)*in++);
        } else {
            out[n++] = *in++;
        }
    }
    out[n] = '\0';
}

static void emit(int level, const char *message)
{
    if (level > 0 && level > verbose) return;
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    char text[2048];
    environment_names(message, text, sizeof text);
    char line[2200];
    int n = world_rank >= 0 ? snprintf(line, sizeof line, "[%s:%05d rank %d] pmpi:gpurdma: %s\n", host, (int)getpid(),
                                       world_rank, text)
                            : snprintf(line, sizeof line, "[%s:%05d] pmpi:gpurdma: %s\n", host, (int)getpid(), text);
    if (n >= (int)sizeof line) n = (int)sizeof line - 1;
    /* One write per line, so that ranks' lines do not interleave. */
    if (n > 0) (void)!write(STDERR_FILENO, line, (size_t)n);
}

void pmpi_output(int level, const char *format, ...)
{
    char text[2048];
    va_list ap;
    va_start(ap, format);
    vsnprintf(text, sizeof text, format, ap);
    va_end(ap);
    emit(level, text);
}

void pmpi_log(int level, const char *message)
{
    emit(level, message);
}
