#include <gtest/gtest.h>

#include "gpurdma/gpurdma.h"
#include "topo/gpu_nic.h"
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
    for (const char *bad : {",", "a,,b", "a,", "mlx5 0", "a;b", "^"})
        EXPECT_FALSE(parse_device_list(bad, &d, &ex)) << bad;
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

// ---- GPU-NIC distance (NCCL_NET_GDR_LEVEL scale)

TEST(GdrLevel, ParsesNamesAnyCase)
{
    PathLevel l;
    ASSERT_TRUE(parse_path_level("pxb", &l));
    EXPECT_EQ(l, PathLevel::PXB);
    ASSERT_TRUE(parse_path_level("SYS", &l));
    EXPECT_EQ(l, PathLevel::SYS);
    EXPECT_FALSE(parse_path_level("NVL", &l));
    EXPECT_FALSE(parse_path_level("", &l));
    EXPECT_EQ(gpurdma_gdr_level_valid("Phb"), 1);
    EXPECT_EQ(gpurdma_gdr_level_valid("3"), 0);
    EXPECT_EQ(gpurdma_gdr_level_valid(nullptr), 0);
    gpurdma_config_t c;
    gpurdma_config_default(&c);
    EXPECT_EQ(gpurdma_gdr_level_valid(c.gdr_level), 1);
}

TEST(GdrLevel, ClassifiesWhereTheDevicesMeet)
{
    EXPECT_EQ(classify_path(true, true, false, 0, 1), PathLevel::LOC);
    EXPECT_EQ(classify_path(false, true, false, 1, 1), PathLevel::PIX);  // one switch
    EXPECT_EQ(classify_path(false, true, false, 3, 1), PathLevel::PXB);  // nested switches
    EXPECT_EQ(classify_path(false, true, true, 2, 1), PathLevel::PHB);  // same host bridge
    EXPECT_EQ(classify_path(false, false, false, 2, 1), PathLevel::PHB);  // two host bridges, one CPU
    EXPECT_EQ(classify_path(false, false, false, 2, 2), PathLevel::SYS);  // across NUMA nodes
    EXPECT_LT(PathLevel::PIX, PathLevel::SYS);
}

TEST(GdrLevel, UnknownDevicesAreFarthest)
{
    PathLevel level = PathLevel::LOC;
    const gpurdma::Status known = gpu_nic_level("0000:ff:1f.7", "nosuchnic0", &level);
    EXPECT_EQ(level, PathLevel::SYS);
    EXPECT_FALSE(known.message().empty());
}
