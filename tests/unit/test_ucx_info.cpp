// Reading UCX's endpoint description: which peers get every message as an active
// message (RMA emulated over tcp) and which get puts above a small size.
#include <gtest/gtest.h>

#include "transport/ucx_context.h"

using gpurdma::transport::rma_emulated_in;

TEST(UcxInfo, TcpRmaLaneIsEmulated)
{
    const char *info =
        "#\n# UCP endpoint \n#\n#               peer: <no debug data>\n"
        "#                 lane[0]:  0:tcp/eth0.0 md[0]                -> md[0]/tcp/sysdev[255] rma_bw#0 am "
        "am_bw#0 wireup\n#\n#                 am_send: 0..<egr/short>..8185..<egr/zcopy>..20553..<rndv>..(inf)\n";
    EXPECT_TRUE(rma_emulated_in(info));
}

TEST(UcxInfo, SharedMemoryOrRdmaLaneIsNative)
{
    const char *shm =
        "#                 lane[0]:  0:self/memory0.0 md[0]          -> md[0]/self/sysdev[255] am am_bw#0\n"
        "#                 lane[1]:  4:sysv/memory.0 md[2]           -> md[2]/sysv/sysdev[255]\n"
        "#                 lane[3]:  6:cma/memory.0 md[4]            -> md[4]/cma/sysdev[255] rma_bw#0\n";
    EXPECT_FALSE(rma_emulated_in(shm));
    const char *rc =
        "#                 lane[0]:  1:rc_mlx5/mlx5_0:1.0 md[1]      -> md[1]/ib/sysdev[0] rma#0 rma_bw#0 am am_bw#0\n"
        "#                 lane[1]:  2:tcp/eth0.0 md[0]              -> md[0]/tcp/sysdev[255] am_bw#1\n";
    EXPECT_FALSE(rma_emulated_in(rc));
}

TEST(UcxInfo, NoRmaLaneMeansEmulated)
{
    EXPECT_TRUE(rma_emulated_in("#  lane[0]:  3:ud_mlx5/mlx5_0:1.0 md[1] -> md[1]/ib/sysdev[0] am am_bw#0 wireup\n"));
}

TEST(UcxInfo, UnreadableTextCountsAsNative)
{
    EXPECT_FALSE(rma_emulated_in(""));
    EXPECT_FALSE(rma_emulated_in("something else entirely\n"));
}
