// libFuzzer target: coll_gpurdma_net_devices parsing ("mlx5_0:1,mlx5_1:1", "^mlx5_2")
// and the rail choice from it over a fixed set of NICs. Accepted lists hold only
// non-empty names of [A-Za-z0-9_.:-]; the chosen device is "" or an RDMA NIC's name,
// never an excluded one.
#include <cstdint>
#include <string>
#include <vector>

#include "topo/nic.h"

#define CHECK(c)                    \
    do {                            \
        if (!(c)) __builtin_trap(); \
    } while (0)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const std::string text(reinterpret_cast<const char *>(data), size);
    std::vector<std::string> devices;
    bool exclude = false;
    if (!gpurdma::topo::parse_device_list(text, &devices, &exclude)) return 0;
    for (const auto &d : devices) {
        CHECK(!d.empty());
        for (char c : d) CHECK(c != ',' && c != '^' && c != ' ' && c != '\0');
    }
    CHECK(!devices.empty() || text.empty());
    std::vector<gpurdma::topo::Nic> nics = {
        {"eth0", false, 0}, {"mlx5_0", true, 1}, {"mlx5_1", true, 2}, {"mlx5_2", true, 2}};
    const std::string chosen = gpurdma::topo::choose_rail_device(nics, devices, exclude);
    if (chosen.empty()) return 0;
    const std::string base = chosen.substr(0, chosen.find(':'));
    CHECK(base == "mlx5_0" || base == "mlx5_1" || base == "mlx5_2");
    bool listed = false;
    for (const auto &d : devices)
        if (d.substr(0, d.find(':')) == base) listed = true;
    if (!devices.empty()) CHECK(listed != exclude);
    return 0;
}
