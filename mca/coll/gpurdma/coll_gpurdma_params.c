/*
 * The core's parameter table (gpurdma_param_info) as MCA variables: one loop registers
 * every row as coll_gpurdma_<name>, and the values given go back into a
 * gpurdma_config_t for the core to check. Nothing here knows a parameter by name.
 */
#include "coll_gpurdma.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opal/mca/base/mca_base_var.h"
#include "opal/mca/base/mca_base_var_enum.h"
#include "opal/util/output.h"

/* Storage of every row: MCA keeps pointing at these. The member used is the row's
 * type: INT and ENUM i, SIZE size, DOUBLE d, STRING text. */
#define MAX_PARAMS 64
typedef union {
    int i;
    size_t size;
    double d;
    char *text;
} param_storage_t;
static param_storage_t storage[MAX_PARAMS];
static int registered;

/*
 * An ENUM row's enumerator is Open MPI's, except that a name it does not know is kept
 * (value UNKNOWN_NAME) instead of refused. Open MPI would print its own help text and
 * carry on with the default; this way the core's check warns in its usual form
 * ("coll_gpurdma_algorithm='x' is not one of ...; using auto") and uses the default.
 */
#define UNKNOWN_NAME (-1)
typedef struct {
    mca_base_var_enum_t *enumerator;
    mca_base_var_enum_vfs_fn_t known_value; /* Open MPI's own lookups */
    mca_base_var_enum_sfv_fn_t known_name;
    char *unknown; /* the name given, when not one of ours */
} lenient_enum_t;
static lenient_enum_t enums[MAX_PARAMS];

static lenient_enum_t *lenient_enum_of(mca_base_var_enum_t *self)
{
    for (int i = 0; i < MAX_PARAMS; i++)
        if (enums[i].enumerator == self) return &enums[i];
    return NULL;
}

static int lenient_value(mca_base_var_enum_t *self, const char *name, int *value)
{
    lenient_enum_t *e = lenient_enum_of(self);
    if (NULL == e) return OPAL_ERR_VALUE_OUT_OF_BOUNDS;
    if (OPAL_SUCCESS == e->known_value(self, name, value)) return OPAL_SUCCESS;
    free(e->unknown);
    e->unknown = strdup(name);
    *value = UNKNOWN_NAME;
    return OPAL_SUCCESS;
}

static int lenient_name(mca_base_var_enum_t *self, const int value, char **name)
{
    lenient_enum_t *e = lenient_enum_of(self);
    if (NULL == e) return OPAL_ERR_VALUE_OUT_OF_BOUNDS;
    if (UNKNOWN_NAME != value || NULL == e->unknown) return e->known_name(self, value, name);
    if (name) *name = strdup(e->unknown);
    return OPAL_SUCCESS;
}

/* Row `index`'s enumerator: value k is p->value_name(k). NULL if it cannot be made. */
static mca_base_var_enum_t *make_enum(int index, const gpurdma_param_info_t *p)
{
    mca_base_var_enum_value_t values[MAX_PARAMS + 1];
    int n = 0;
    for (; n < MAX_PARAMS && p->value_name(n); n++) {
        values[n].value = n;
        values[n].string = p->value_name(n);
    }
    values[n].value = 0;
    values[n].string = NULL;
    char name[96];
    snprintf(name, sizeof name, "coll_gpurdma_%s", p->name);
    lenient_enum_t *e = &enums[index];
    if (OPAL_SUCCESS != mca_base_var_enum_create(name, values, &e->enumerator)) {
        e->enumerator = NULL;
        return NULL;
    }
    e->known_value = e->enumerator->value_from_string;
    e->known_name = e->enumerator->string_from_value;
    e->enumerator->value_from_string = lenient_value;
    e->enumerator->string_from_value = lenient_name;
    return e->enumerator;
}

static int enum_value(const gpurdma_param_info_t *p, const char *name)
{
    for (int k = 0; p->value_name(k); k++)
        if (0 == strcmp(p->value_name(k), name)) return k;
    return 0;
}

static const char *enum_name(int index, const gpurdma_param_info_t *p)
{
    const int v = storage[index].i;
    if (UNKNOWN_NAME == v && enums[index].unknown) return enums[index].unknown;
    for (int k = 0; p->value_name(k); k++)
        if (k == v) return p->value_name(k);
    return "";
}

void mca_coll_gpurdma_register_params(void)
{
    registered = gpurdma_param_count();
    if (registered > MAX_PARAMS) {
        opal_output(0, "coll:gpurdma: the core has %d parameters, the shim room for %d (MAX_PARAMS)", registered,
                    MAX_PARAMS);
        registered = MAX_PARAMS;
    }
    for (int i = 0; i < registered; i++) {
        const gpurdma_param_info_t *p = gpurdma_param_info(i);
        param_storage_t *s = &storage[i];
        mca_base_var_type_t type = MCA_BASE_VAR_TYPE_INT;
        mca_base_var_enum_t *enumerator = NULL;
        switch (p->type) {
            case GPURDMA_PARAM_INT: s->i = (int)p->default_number; break;
            case GPURDMA_PARAM_SIZE:
                s->size = (size_t)p->default_number;
                type = MCA_BASE_VAR_TYPE_SIZE_T;
                break;
            case GPURDMA_PARAM_DOUBLE:
                s->d = p->default_number;
                type = MCA_BASE_VAR_TYPE_DOUBLE;
                break;
            case GPURDMA_PARAM_STRING:
                s->text = (char *)p->default_text; /* MCA copies it */
                type = MCA_BASE_VAR_TYPE_STRING;
                break;
            case GPURDMA_PARAM_ENUM:
                s->i = enum_value(p, p->default_text);
                enumerator = make_enum(i, p);
                break;
        }
        const int level = p->info_level < 1 ? 1 : p->info_level > 9 ? 9 : p->info_level;
        (void)mca_base_component_var_register(&mca_coll_gpurdma_component.collm_version, p->name, p->help, type,
                                              enumerator, 0, 0, (mca_base_var_info_lvl_t)(OPAL_INFO_LVL_1 + level - 1),
                                              MCA_BASE_VAR_SCOPE_READONLY, s);
        /* The variable holds its own reference. */
        if (enumerator) OBJ_RELEASE(enumerator);
    }
}

void mca_coll_gpurdma_config_from_params(gpurdma_config_t *config)
{
    gpurdma_config_default(config);
    for (int i = 0; i < registered; i++) {
        const gpurdma_param_info_t *p = gpurdma_param_info(i);
        const param_storage_t *s = &storage[i];
        gpurdma_param_value_t v;
        switch (p->type) {
            case GPURDMA_PARAM_INT: v.i = s->i; break;
            case GPURDMA_PARAM_SIZE: v.size = s->size; break;
            case GPURDMA_PARAM_DOUBLE: v.d = s->d; break;
            case GPURDMA_PARAM_STRING: v.text = s->text; break;
            case GPURDMA_PARAM_ENUM: v.text = enum_name(i, p); break;
            default: continue;
        }
        (void)gpurdma_config_set(config, i, v);
    }
}
