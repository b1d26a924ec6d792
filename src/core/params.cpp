#include "core/params.h"

#include <cstring>
#include <vector>

namespace gpurdma::params {

namespace {

uint64_t bits(double v)
{
    uint64_t b;
    std::memcpy(&b, &v, sizeof b);
    return b;
}

// (name, value as bits or text): what every rank must share.
std::vector<std::pair<const char *, uint64_t>> agreed_numbers(const gpurdma_config_t &c)
{
    return {{"slots", static_cast<uint64_t>(c.slots)},
            {"chunk_size", c.chunk_size},
            {"node_chunk_size", c.node_chunk_size},
            {"small_msg_max", c.small_msg_max},
            {"net_alpha_us", bits(c.net_alpha_us)},
            {"net_gbps", bits(c.net_gbps)},
            {"shm_alpha_us", bits(c.shm_alpha_us)},
            {"shm_gbps", bits(c.shm_gbps)},
            {"reduce_gbps", bits(c.reduce_gbps)},
            {"calibrate", static_cast<uint64_t>(c.calibrate)}};
}

std::vector<std::pair<const char *, std::string>> agreed_texts(const gpurdma_config_t &c)
{
    return {{"algorithm", c.algorithm ? c.algorithm : ""}, {"logical_nodes", c.logical_nodes ? c.logical_nodes : ""}};
}

}  // namespace

void write_agreed(wire::Writer &record, const gpurdma_config_t &config)
{
    for (const auto &n : agreed_numbers(config)) record.u64(n.second);
    for (const auto &t : agreed_texts(config)) record.str(t.second);
}

bool compare_agreed(wire::Reader &record, const gpurdma_config_t &config, std::string *differing)
{
    differing->clear();
    auto note = [differing](const char *name) { *differing += (differing->empty() ? "" : ", ") + std::string(name); };
    for (const auto &n : agreed_numbers(config)) {
        uint64_t v = 0;
        if (!record.u64(&v)) return false;
        if (v != n.second) note(n.first);
    }
    for (const auto &t : agreed_texts(config)) {
        std::string v;
        if (!record.str(&v)) return false;
        if (v != t.second) note(t.first);
    }
    return true;
}

}  // namespace gpurdma::params
