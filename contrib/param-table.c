/*
 * Prints the core's parameter table, one row per line, tab-separated:
 *   coll_gpurdma_<name>  type  default  agreed  info-level  help
 * Defaults as README.md writes them: int and size in decimal, double as %g, text as is,
 * empty text as "(empty)". Used by contrib/check-readme-params.sh (make check).
 */
#include <stdio.h>

#include "gpurdma/gpurdma.h"

static const char *type_name(gpurdma_param_type_t type)
{
    switch (type) {
    case GPURDMA_PARAM_INT: return "int";
    case GPURDMA_PARAM_SIZE: return "size";
    case GPURDMA_PARAM_DOUBLE: return "double";
    case GPURDMA_PARAM_STRING: return "string";
    case GPURDMA_PARAM_ENUM: return "enum";
    }
    return "?";
}

int main(void)
{
    for (int i = 0; i < gpurdma_param_count(); i++) {
        const gpurdma_param_info_t *p = gpurdma_param_info(i);
        char value[64];
        switch (p->type) {
        case GPURDMA_PARAM_INT: snprintf(value, sizeof value, "%d", (int)p->default_number); break;
        case GPURDMA_PARAM_SIZE: snprintf(value, sizeof value, "%zu", (size_t)p->default_number); break;
        case GPURDMA_PARAM_DOUBLE: snprintf(value, sizeof value, "%g", p->default_number); break;
        default: snprintf(value, sizeof value, "%s", p->default_text[0] ? p->default_text : "(empty)"); break;
        }
        printf("coll_gpurdma_%s\t%s\t%s\t%d\t%d\t%s\n", p->name, type_name(p->type), value, p->agreed, p->info_level,
               p->help);
    }
    return 0;
}
