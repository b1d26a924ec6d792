#include <gtest/gtest.h>

#include "topo/nic.h"

using namespace gpurdma::topo;

TEST(Nic, ParseDeviceList)
{
    std::vector<std::string> d;
    bool ex = true;
    EXPECT_TRUE(parse_device_list("mlx5_0:1,mlx5_1", &d, &ex));
    EXPECT_FALSE(ex);
    EXPECT_EQ(d, (std::vector<std::string>{"mlx5_0:1", "mlx5_1"}));
    EXPECT_TRUE(parse_device_list("^mlx5_2", &d, &ex));
    EXPECT_TRUE(ex);
    EXPECT_EQ(d, (std::vector<std::string>{"mlx5_2"}));
    EXPECT_TRUE(parse_device_list("", &d, &ex));
    EXPECT_TRUE(d.empty());
    for (const char *bad : {",", "a,,b", "a,", "mlx5 0", "a;b", "^"}) EXPECT_FALSE(parse_device_list(bad, &d, &ex)) << bad;
}

TEST(Nic, ChoosesNearestAllowedRdmaDevice)
{
    const std::vector<Nic> nics = {{"eth0", false, 0}, {"mlx5_1", true, 1}, {"mlx5_0", true, 3}};
    EXPECT_EQ(choose_rail_device(nics, {}, false), "mlx5_1:1");
    EXPECT_EQ(choose_rail_device(nics, {"mlx5_0:2"}, false), "mlx5_0:2");
    EXPECT_EQ(choose_rail_device(nics, {"mlx5_1"}, true), "mlx5_0:1");
    EXPECT_EQ(choose_rail_device(nics, {"mlx5_9"}, false), "");
    EXPECT_EQ(choose_rail_device({{"eth0", false, 0}}, {}, false), "");  // Ethernet only: UCX decides
}

TEST(Nic, ListsWithoutCrashing)
{
    std::string why;
    const auto nics = local_nics(&why);
    for (size_t i = 1; i < nics.size(); ++i) EXPECT_LE(nics[i - 1].distance, nics[i].distance);
}
