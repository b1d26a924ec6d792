// gpurdma_config_t from the parameter table: defaults, storing a value, validation.
#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

#include "base/log.h"
#include "core/params.h"
#include "gpurdma/gpurdma.h"

namespace {

using gpurdma::params::field;

std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char *fmt, ...)
{
    char text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return text;
}

bool names_contain(const gpurdma_param_info_t &p, const char *text)
{
    for (int i = 0; p.value_name(i); ++i)
        if (0 == std::strcmp(p.value_name(i), text)) return true;
    return false;
}

// "is not one of auto, node, ring": an ENUM row's complaint, from its names.
std::string names_complaint(const gpurdma_param_info_t &p)
{
    std::string out = "is not one of ";
    for (int i = 0; p.value_name(i); ++i) out += (i ? ", " : "") + std::string(p.value_name(i));
    return out;
}

bool number_valid(const gpurdma_param_info_t &p, double v)
{
    // Written so that NaN fails every bound.
    return (p.min_excluded ? v > p.min : v >= p.min) && v <= p.max;
}

// Whether the row's value is allowed; *shown and *fallback are the value and the
// default as the warning prints them.
bool check(const gpurdma_param_info_t &p, const gpurdma_config_t &c, std::string *shown, std::string *fallback)
{
    switch (p.type) {
        case GPURDMA_PARAM_INT: {
            const int v = field<int>(c, p);
            *shown = format("%d", v);
            *fallback = format("%d", static_cast<int>(p.default_number));
            return number_valid(p, v);
        }
        case GPURDMA_PARAM_SIZE: {
            const size_t v = field<size_t>(c, p);
            *shown = format("%zu", v);
            *fallback = format("%zu", static_cast<size_t>(p.default_number));
            return number_valid(p, static_cast<double>(v)) && (p.multiple_of == 0 || v % p.multiple_of == 0);
        }
        case GPURDMA_PARAM_DOUBLE: {
            const double v = field<double>(c, p);
            *shown = format("%g", v);
            *fallback = format("%g", p.default_number);
            return number_valid(p, v);
        }
        case GPURDMA_PARAM_STRING:
        case GPURDMA_PARAM_ENUM: {
            const char *v = field<const char *>(c, p);
            if (!v) v = "";
            *shown = "'" + std::string(v) + "'";
            *fallback = p.default_text;
            if (p.type == GPURDMA_PARAM_ENUM) return names_contain(p, v);
            return !p.text_valid || p.text_valid(v);
        }
    }
    return false;
}

void set_default(const gpurdma_param_info_t &p, gpurdma_config_t &c)
{
    switch (p.type) {
        case GPURDMA_PARAM_INT: field<int>(c, p) = static_cast<int>(p.default_number); break;
        case GPURDMA_PARAM_SIZE: field<size_t>(c, p) = static_cast<size_t>(p.default_number); break;
        case GPURDMA_PARAM_DOUBLE: field<double>(c, p) = p.default_number; break;
        case GPURDMA_PARAM_STRING:
        case GPURDMA_PARAM_ENUM: field<const char *>(c, p) = p.default_text; break;
    }
}

// Each peer channel holds slots x chunk_size (an inter-node one rail_slots x chunk_size):
// 64 x 64 MiB would ask for 4 GiB per peer.
bool channels_too_large(const gpurdma_config_t &c)
{
    return static_cast<size_t>(std::max(c.slots, c.rail_slots)) * c.chunk_size > (size_t{1} << 30);
}

// The rules between parameters, after each has been checked on its own.
int check_combinations(gpurdma_config_t &c, const gpurdma::Logger &log)
{
    if (channels_too_large(c)) {
        gpurdma_config_t d;
        gpurdma_config_default(&d);
        const bool rail = c.rail_slots > c.slots;
        log.log(0, "coll_gpurdma_%s=%d x coll_gpurdma_chunk_size=%zu is over 1 GiB per peer; using %s",
                rail ? "rail_slots" : "slots", rail ? c.rail_slots : c.slots, c.chunk_size,
                rail ? "0 (auto)" : (std::to_string(d.slots) + " slots").c_str());
        if (rail) c.rail_slots = d.rail_slots;
        else c.slots = d.slots;
        return check_combinations(c, log) + 1;  // the other of the two may be over too
    }
    return 0;
}

// gpurdma_config_validate's work: each row on its own, then the rules between rows.
int validate(gpurdma_config_t &config)
{
    // Warnings are level 0: printed whatever the verbosity.
    const gpurdma::Logger log(config.log, std::max(config.verbose, 0));
    int replaced = 0;
    for (size_t i = 0; i < gpurdma::params::count(); ++i) {
        const gpurdma_param_info_t &p = gpurdma::params::row(i);
        std::string shown, fallback;
        if (check(p, config, &shown, &fallback)) continue;
        const std::string complaint =
            p.type == GPURDMA_PARAM_ENUM ? names_complaint(p) : (p.complaint ? p.complaint : "is not valid");
        log.log(0, "coll_gpurdma_%s=%s %s; using %s", p.name, shown.c_str(), complaint.c_str(), fallback.c_str());
        set_default(p, config);
        ++replaced;
    }
    return replaced + check_combinations(config, log);
}

}  // namespace

namespace gpurdma::params {

Status check_config(const gpurdma_config_t &config)
{
    for (size_t i = 0; i < count(); ++i) {
        const gpurdma_param_info_t &p = row(i);
        std::string shown, fallback;
        if (check(p, config, &shown, &fallback)) continue;
        const std::string complaint =
            p.type == GPURDMA_PARAM_ENUM ? names_complaint(p) : (p.complaint ? p.complaint : "is not valid");
        return Status::error(GPURDMA_ERR_INVALID,
                             "coll_gpurdma_" + std::string(p.name) + "=" + shown + " " + complaint);
    }
    if (channels_too_large(config))
        return Status::error(GPURDMA_ERR_INVALID,
                             "coll_gpurdma_slots (or rail_slots) x coll_gpurdma_chunk_size is over 1 GiB per peer");
    return Status::ok();
}

}  // namespace gpurdma::params

extern "C" {

void gpurdma_config_default(gpurdma_config_t *config)
{
    std::memset(config, 0, sizeof *config);
    for (size_t i = 0; i < gpurdma::params::count(); ++i) set_default(gpurdma::params::row(i), *config);
    // Not parameters: facts the caller supplies.
    config->local_processes = 0;
    config->local_rank = -1;
    config->log = nullptr;
    config->outside_progress = nullptr;
}

gpurdma_status_t gpurdma_config_set(gpurdma_config_t *config, int index, gpurdma_param_value_t value)
{
    const gpurdma_param_info_t *p = gpurdma_param_info(index);
    if (!config || !p) return GPURDMA_ERR_INVALID;
    switch (p->type) {
        case GPURDMA_PARAM_INT: field<int>(*config, *p) = value.i; break;
        case GPURDMA_PARAM_SIZE: field<size_t>(*config, *p) = value.size; break;
        case GPURDMA_PARAM_DOUBLE: field<double>(*config, *p) = value.d; break;
        case GPURDMA_PARAM_STRING:
        case GPURDMA_PARAM_ENUM: field<const char *>(*config, *p) = value.text ? value.text : ""; break;
    }
    return GPURDMA_OK;
}

int gpurdma_config_validate(gpurdma_config_t *config)
{
    if (!config) return 0;
    try {
        return validate(*config);
    } catch (...) {  // the exception barrier: nothing crosses into C
        return -1;
    }
}

}  // extern "C"
