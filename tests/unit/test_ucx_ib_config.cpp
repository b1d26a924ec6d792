// coll_gpurdma_ib_gid_index / _ib_tc / _ib_sl -> the keys and values gpurdma's UCX
// context gets through ucp_config_modify, for the UCX versions whose key forms differ.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "transport/ucx_context.h"

using gpurdma::transport::uct_table_key;
using gpurdma::transport::ucx_ib_config;
using gpurdma::transport::UcxContext;
using gpurdma::transport::UcxIbSettings;
using Entries = std::vector<std::pair<std::string, std::string>>;

TEST(UcxIbConfig, NothingSetLeavesUcxAlone)
{
    EXPECT_TRUE(ucx_ib_config(UcxIbSettings{}, 1, 13).empty());
    EXPECT_TRUE(ucx_ib_config(UcxIbSettings{}, 1, 18).empty());
}

TEST(UcxIbConfig, EachSettingMapsToItsUcxKey)
{
    UcxIbSettings ib;
    ib.gid_index = 3;
    ib.tc = 106;
    ib.sl = 5;
    // UCX 1.13 (Debian 12): the memory domain's GID_INDEX matches without its prefix.
    EXPECT_EQ(ucx_ib_config(ib, 1, 13), (Entries{{"GID_INDEX", "3"}, {"IB_TRAFFIC_CLASS", "106"}, {"IB_SL", "5"}}));
    EXPECT_EQ(ucx_ib_config(ib, 1, 16), (Entries{{"GID_INDEX", "3"}, {"IB_TRAFFIC_CLASS", "106"}, {"IB_SL", "5"}}));
    // UCX 1.17 on (Debian 13 has 1.18): only with it.
    EXPECT_EQ(ucx_ib_config(ib, 1, 17), (Entries{{"IB_GID_INDEX", "3"}, {"IB_TRAFFIC_CLASS", "106"}, {"IB_SL", "5"}}));
    EXPECT_EQ(ucx_ib_config(ib, 1, 18), (Entries{{"IB_GID_INDEX", "3"}, {"IB_TRAFFIC_CLASS", "106"}, {"IB_SL", "5"}}));
    EXPECT_EQ(ucx_ib_config(ib, 2, 0), (Entries{{"IB_GID_INDEX", "3"}, {"IB_TRAFFIC_CLASS", "106"}, {"IB_SL", "5"}}));
}

TEST(UcxIbConfig, OnlyTheSettingsGivenAndZeroIsAValue)
{
    UcxIbSettings ib;
    ib.sl = 0;
    EXPECT_EQ(ucx_ib_config(ib, 1, 13), (Entries{{"IB_SL", "0"}}));
    ib = UcxIbSettings{};
    ib.gid_index = 0;
    EXPECT_EQ(ucx_ib_config(ib, 1, 18), (Entries{{"IB_GID_INDEX", "0"}}));
    ib = UcxIbSettings{};
    ib.tc = 255;
    EXPECT_EQ(ucx_ib_config(ib, 1, 13), (Entries{{"IB_TRAFFIC_CLASS", "255"}}));
}

TEST(UcxIbConfig, TcpSegmentKeysFollowTheSameRule)
{
    EXPECT_EQ(uct_table_key("TCP_", "TX_SEG_SIZE", 1, 13), "TX_SEG_SIZE");
    EXPECT_EQ(uct_table_key("TCP_", "RX_SEG_SIZE", 1, 16), "RX_SEG_SIZE");
    EXPECT_EQ(uct_table_key("TCP_", "TX_SEG_SIZE", 1, 17), "TCP_TX_SEG_SIZE");
    EXPECT_EQ(uct_table_key("TCP_", "RX_SEG_SIZE", 1, 18), "TCP_RX_SEG_SIZE");
}

// On this machine's UCX (no RDMA device needed): the settings are accepted and the
// context starts; they would only take effect on an IB/RoCE interface.
TEST(UcxIbConfig, ContextStartsWithEverySettingGiven)
{
    UcxIbSettings ib;
    ib.gid_index = 3;
    ib.tc = 106;
    ib.sl = 5;
    std::unique_ptr<UcxContext> context;
    const gpurdma::Status st = UcxContext::create("tcp,self", "", ib, &context);
    ASSERT_TRUE(st.is_ok()) << st.message();
    EXPECT_FALSE(context->address().empty());
}
