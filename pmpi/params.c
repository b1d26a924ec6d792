/*
 * The core's parameter table (gpurdma_param_info) read from the environment: row
 * <name> is GPURDMA_<NAME> (coll_gpurdma_<name> in Open MPI), with the same meaning and
 * the same checks (gpurdma_config_validate). Nothing here knows a parameter by name.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmpi/interposer.h"

/* GPURDMA_<NAME> for row name <name>. */
static const char *variable(const gpurdma_param_info_t *p)
{
    static char name[96];
    int n = snprintf(name, sizeof name, "GPURDMA_");
    for (const char *s = p->name; *s && n < (int)sizeof name - 1; ++s) name[n++] = (char)toupper((unsigned char)*s);
    name[n] = '\0';
    return getenv(name) ? name : NULL;
}

/* A whole number as MCA reads one: decimal, 0x hex or 0 octal, with an optional k, m or
 * g suffix (powers of 1024). False if the text is not one. */
static bool whole_number(const char *text, long long *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 0);
    if (end == text || errno) return false;
    switch (*end) {
        case 'g':
        case 'G': v *= 1024; /* fall through */
        case 'm':
        case 'M': v *= 1024; /* fall through */
        case 'k':
        case 'K':
            v *= 1024;
            ++end;
            break;
        default: break;
    }
    *out = v;
    return *end == '\0';
}

int pmpi_priority(void)
{
    /* Preloading the library is the opt-in: on unless GPURDMA_PRIORITY says 0 (read once). */
    static int priority = -1;
    int now = __atomic_load_n(&priority, __ATOMIC_RELAXED);
    if (now >= 0) return now;
    const char *text = getenv("GPURDMA_PRIORITY");
    long long v = 100;
    if (text && !whole_number(text, &v)) {
        pmpi_output(0, "GPURDMA_PRIORITY='%s' is not a number; using 100", text);
        v = 100;
    }
    now = v <= 0 ? 0 : v > 100 ? 100 : (int)v;
    __atomic_store_n(&priority, now, __ATOMIC_RELAXED);
    return now;
}

void pmpi_config_from_environment(gpurdma_config_t *config)
{
    gpurdma_config_default(config);
    for (int i = 0; i < gpurdma_param_count(); i++) {
        const gpurdma_param_info_t *p = gpurdma_param_info(i);
        const char *name = variable(p);
        if (NULL == name) continue;
        const char *text = getenv(name);
        gpurdma_param_value_t v;
        long long whole = 0;
        char *end = NULL;
        bool number = true;
        switch (p->type) {
            case GPURDMA_PARAM_INT:
                number = whole_number(text, &whole) && whole >= INT_MIN && whole <= INT_MAX;
                v.i = (int)whole;
                break;
            case GPURDMA_PARAM_SIZE:
                /* A negative size stays negative for the range check to refuse. */
                number = whole_number(text, &whole);
                v.size = whole < 0 ? (size_t)-1 : (size_t)whole;
                break;
            case GPURDMA_PARAM_DOUBLE:
                v.d = strtod(text, &end);
                number = end != text && *end == '\0';
                break;
            case GPURDMA_PARAM_STRING:
            case GPURDMA_PARAM_ENUM: v.text = text; break;
        }
        if (!number) {
            /* Not a value at all: the default, said as the core says a bad value. */
            pmpi_output(0, "%s='%s' is not a number; using the default", name, text);
            continue;
        }
        (void)gpurdma_config_set(config, i, v);
    }
}
