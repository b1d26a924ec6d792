// The parameter table: defaults, validation warnings, the set-up agreement, the C API.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "algo/rail_admission.h"
#include "core/params.h"
#include "gpurdma/gpurdma.h"
#include "plan/planner.h"

namespace {

std::vector<std::string> warnings;

void capture(int level, const char *message)
{
    if (level == 0) warnings.push_back(message);
}

gpurdma_config_t defaults()
{
    gpurdma_config_t c;
    gpurdma_config_default(&c);
    c.log = capture;
    warnings.clear();
    return c;
}

// Validates c and returns its one warning ("" if none; fails on more than one).
std::string validate_one(gpurdma_config_t *c)
{
    warnings.clear();
    const int replaced = gpurdma_config_validate(c);
    EXPECT_EQ(static_cast<size_t>(replaced), warnings.size());
    EXPECT_LE(warnings.size(), 1u);
    return warnings.empty() ? "" : warnings[0];
}

int index_of(const char *name)
{
    for (int i = 0; i < gpurdma_param_count(); ++i)
        if (std::string(gpurdma_param_info(i)->name) == name) return i;
    return -1;
}

}  // namespace

TEST(Params, TableRowsAreWellFormed)
{
    std::set<std::string> names;
    ASSERT_GT(gpurdma_param_count(), 0);
    for (int i = 0; i < gpurdma_param_count(); ++i) {
        const gpurdma_param_info_t *p = gpurdma_param_info(i);
        ASSERT_NE(p, nullptr);
        EXPECT_TRUE(names.insert(p->name).second) << p->name << " twice";
        EXPECT_GT(std::string(p->help).size(), 10u) << p->name;
        EXPECT_GE(p->info_level, 1) << p->name;
        EXPECT_LE(p->info_level, 9) << p->name;
        EXPECT_LT(p->offset, sizeof(gpurdma_config_t)) << p->name;
        if (p->type == GPURDMA_PARAM_ENUM) {
            EXPECT_NE(p->value_name, nullptr) << p->name;
        }
        if (p->type == GPURDMA_PARAM_STRING || p->type == GPURDMA_PARAM_ENUM) {
            EXPECT_NE(p->default_text, nullptr) << p->name;
        }
    }
    EXPECT_EQ(gpurdma_param_info(-1), nullptr);
    EXPECT_EQ(gpurdma_param_info(gpurdma_param_count()), nullptr);
    EXPECT_EQ(names.count("priority"), 0u) << "priority is the component's own";
}

TEST(Params, DefaultsComeFromTheTableAndAreValid)
{
    gpurdma_config_t c = defaults();
    EXPECT_EQ(c.chunk_size, 256u * 1024);
    EXPECT_EQ(c.slots, 4);
    EXPECT_EQ(c.small_msg_max, 64u * 1024);
    EXPECT_EQ(c.node_chunk_size, 256u * 1024);
    EXPECT_DOUBLE_EQ(c.timeout_s, 60.0);
    EXPECT_DOUBLE_EQ(c.spin_us, 20.0);
    EXPECT_STREQ(c.algorithm, "auto");
    EXPECT_STREQ(c.gdr_level, "PXB");
    EXPECT_STREQ(c.ucx_tls, "");
    EXPECT_EQ(c.cuda, 1);
    EXPECT_EQ(c.rocm, 1);
    EXPECT_EQ(c.calibrate, 0);
    EXPECT_EQ(c.ib_gid_index, -1);
    EXPECT_EQ(c.local_rank, -1);
    EXPECT_EQ(c.local_processes, 0);
    EXPECT_EQ(validate_one(&c), "");
}

TEST(Params, AlgorithmNamesAreThePlannersSpellings)
{
    int n = 0;
    for (; gpurdma_algorithm_name(n); ++n) {
        gpurdma::plan::Algorithm a;
        EXPECT_TRUE(gpurdma::plan::parse_algorithm(gpurdma_algorithm_name(n), &a)) << gpurdma_algorithm_name(n);
    }
    EXPECT_EQ(n, 9);
    EXPECT_STREQ(gpurdma_algorithm_name(0), "auto");
    EXPECT_EQ(gpurdma_algorithm_name(-1), nullptr);
    const gpurdma_param_info_t *p = gpurdma_param_info(index_of("algorithm"));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->type, GPURDMA_PARAM_ENUM);
    EXPECT_EQ(p->value_name, &gpurdma_algorithm_name);
}

TEST(Params, BadValuesWarnOnceAndTakeTheDefault)
{
    gpurdma_config_t c = defaults();
    c.chunk_size = 100;
    EXPECT_EQ(validate_one(&c), "coll_gpurdma_chunk_size=100 is not a multiple of 64 in 4096..64 MiB; using 262144");
    EXPECT_EQ(c.chunk_size, 256u * 1024);

    c.chunk_size = 4100;  // in range, not a multiple of 64
    EXPECT_EQ(validate_one(&c), "coll_gpurdma_chunk_size=4100 is not a multiple of 64 in 4096..64 MiB; using 262144");
    c.small_msg_max = static_cast<size_t>(-1);
    EXPECT_EQ(validate_one(&c), "coll_gpurdma_small_msg_max=18446744073709551615 is not in 0..64 MiB; using 65536");
    c.small_msg_max = 0;
    EXPECT_EQ(validate_one(&c), "");
    c.slots = 0;
    EXPECT_EQ(validate_one(&c), "coll_gpurdma_slots=0 is not in 1..64; using 4");
    c.timeout_s = NAN;
    EXPECT_EQ(validate_one(&c), "coll_gpurdma_timeout=nan is not in (0, 86400]; using 60");
    c.timeout_s = 0;
    EXPECT_EQ(validate_one(&c), "coll_gpurdma_timeout=0 is not in (0, 86400]; using 60");
    c.spin_us = 1e9;
    EXPECT_EQ(validate_one(&c), "coll_gpurdma_spin_us=1e+09 is over 1 s; using 20");
    c.spin_us = -1;
    EXPECT_EQ(validate_one(&c), "");
    c.net_gbps = 0;
    EXPECT_EQ(validate_one(&c), "coll_gpurdma_net_gbps=0 is not in [1e-06, 1e6]; using 3");
    c.net_alpha_us = -1;
    EXPECT_EQ(validate_one(&c), "coll_gpurdma_net_alpha_us=-1 is not in [0, 1e6]; using 30");
    c.calibrate = 7;
    EXPECT_EQ(validate_one(&c), "coll_gpurdma_calibrate=7 is not 0 or 1; using 0");
    c.cuda = -1;
    EXPECT_EQ(validate_one(&c), "coll_gpurdma_cuda=-1 is not 0 or 1; using 1");
    c.rocm = 2;
    EXPECT_EQ(validate_one(&c), "coll_gpurdma_rocm=2 is not 0 or 1; using 1");
    c.ib_gid_index = -2;
    EXPECT_EQ(validate_one(&c), "coll_gpurdma_ib_gid_index=-2 is not -1 or in 0..1023; using -1");
    c.ib_sl = 15;
    EXPECT_EQ(validate_one(&c), "");
    c.algorithm = "bogus";
    EXPECT_EQ(validate_one(&c),
              "coll_gpurdma_algorithm='bogus' is not one of auto, node, ring, rd, hier, rhd, "
              "recursive_doubling, hierarchical, halving_doubling; using auto");
    EXPECT_STREQ(c.algorithm, "auto");
    c.algorithm = "hierarchical";
    EXPECT_EQ(validate_one(&c), "");
    c.gdr_level = "far";
    EXPECT_EQ(validate_one(&c), "coll_gpurdma_gdr_level='far' is not one of LOC, PIX, PXB, PHB, SYS; using PXB");
    c.gdr_level = "sys";
    EXPECT_EQ(validate_one(&c), "");
}

TEST(Params, SlotsTimesChunkStayUnderOneGiB)
{
    gpurdma_config_t c = defaults();
    c.slots = 64;
    c.chunk_size = 32u << 20;
    EXPECT_EQ(validate_one(&c),
              "coll_gpurdma_slots=64 x coll_gpurdma_chunk_size=33554432 is over 1 GiB per peer; using 4 slots");
    EXPECT_EQ(c.slots, 4);
    EXPECT_EQ(c.chunk_size, 32u << 20);
    // The inter-node channels' own depth is held to the same bound.
    c = defaults();
    c.rail_slots = 64;
    c.chunk_size = 32u << 20;
    EXPECT_EQ(validate_one(&c),
              "coll_gpurdma_rail_slots=64 x coll_gpurdma_chunk_size=33554432 is over 1 GiB per peer; using 0 (auto)");
    EXPECT_EQ(c.rail_slots, 0);
    c = defaults();
    c.rail_slots = 65;
    EXPECT_EQ(validate_one(&c).rfind("coll_gpurdma_rail_slots=65 is not in 0..64; using", 0), 0u);
}

// Automatic admission on the rails: from 8 nodes on, 2 in flight once the rail's writes
// (about chunk_size / nodes) reach 128 KiB, else the node's depth (never more than
// coll_gpurdma_slots); a value given is taken as it is.
TEST(Params, RailSlotsAutomatic)
{
    using gpurdma::algo::rail_slots_for;
    EXPECT_EQ(rail_slots_for(0, 4, 256u << 10, 2), 4);  // 128 KiB writes, but 2 nodes
    EXPECT_EQ(rail_slots_for(0, 4, 4u << 20, 4), 4);  // 1 MiB, 4 nodes
    EXPECT_EQ(rail_slots_for(0, 4, 1u << 20, 8), 2);  // 128 KiB, 8 nodes
    EXPECT_EQ(rail_slots_for(0, 4, (1u << 20) - 64, 8), 4);  // just under 128 KiB
    EXPECT_EQ(rail_slots_for(0, 4, 4u << 20, 128), 4);  // 32 KiB
    EXPECT_EQ(rail_slots_for(0, 4, 16u << 20, 128), 2);  // 128 KiB
    EXPECT_EQ(rail_slots_for(0, 4, 4u << 20, 16), 2);  // 256 KiB
    EXPECT_EQ(rail_slots_for(0, 4, 1u << 20, 16), 4);  // 64 KiB
    EXPECT_EQ(rail_slots_for(0, 1, 16u << 20, 16), 1);  // never above coll_gpurdma_slots
    EXPECT_EQ(rail_slots_for(0, 8, 64u << 20, 0), 8);  // no nodes counted
    EXPECT_EQ(rail_slots_for(3, 4, 16u << 20, 16), 3);
    EXPECT_EQ(rail_slots_for(64, 1, 4096, 8), 64);
}

TEST(Params, SetStoresByType)
{
    gpurdma_config_t c = defaults();
    gpurdma_param_value_t v;
    v.size = 8192;
    EXPECT_EQ(gpurdma_config_set(&c, index_of("chunk_size"), v), GPURDMA_OK);
    EXPECT_EQ(c.chunk_size, 8192u);
    v.i = 9;
    EXPECT_EQ(gpurdma_config_set(&c, index_of("slots"), v), GPURDMA_OK);
    EXPECT_EQ(c.slots, 9);
    v.d = 2.5;
    EXPECT_EQ(gpurdma_config_set(&c, index_of("timeout"), v), GPURDMA_OK);
    EXPECT_DOUBLE_EQ(c.timeout_s, 2.5);
    v.text = nullptr;
    EXPECT_EQ(gpurdma_config_set(&c, index_of("ucx_tls"), v), GPURDMA_OK);
    EXPECT_STREQ(c.ucx_tls, "");
    v.text = "ring";
    EXPECT_EQ(gpurdma_config_set(&c, index_of("algorithm"), v), GPURDMA_OK);
    EXPECT_STREQ(c.algorithm, "ring");
    EXPECT_EQ(gpurdma_config_set(&c, gpurdma_param_count(), v), GPURDMA_ERR_INVALID);
    EXPECT_EQ(gpurdma_config_set(nullptr, 0, v), GPURDMA_ERR_INVALID);
}

TEST(Params, AgreementNamesWhatDiffers)
{
    const gpurdma_config_t mine = defaults();
    gpurdma_config_t theirs = mine;
    auto compare = [&mine](const gpurdma_config_t &other, std::string *differing) {
        gpurdma::wire::Writer w;
        gpurdma::params::write_agreed(w, other);
        const std::string record = w.take();
        gpurdma::wire::Reader r(record);
        return gpurdma::params::compare_agreed(r, mine, differing);
    };
    std::string differing = "x";
    EXPECT_TRUE(compare(theirs, &differing));
    EXPECT_EQ(differing, "");

    theirs.timeout_s = 5;  // each rank may wait as long as it likes
    theirs.ucx_tls = "tcp";
    EXPECT_TRUE(compare(theirs, &differing));
    EXPECT_EQ(differing, "");

    theirs.slots = 8;
    theirs.algorithm = "ring";
    theirs.net_gbps = 12;
    EXPECT_TRUE(compare(theirs, &differing));
    EXPECT_EQ(differing, "slots, net_gbps, algorithm");

    std::string empty;
    gpurdma::wire::Reader short_record(empty);
    EXPECT_FALSE(gpurdma::params::compare_agreed(short_record, mine, &differing));
}

TEST(Params, TheAgreedRowsAreTheOnesThatShapeThePlan)
{
    std::set<std::string> agreed;
    for (int i = 0; i < gpurdma_param_count(); ++i)
        if (gpurdma_param_info(i)->agreed) agreed.insert(gpurdma_param_info(i)->name);
    // device_stage_max picks each GPU-buffer call's path by its size: every rank alike.
    // The <coll>_enable rows decide whether gpurdma or the previous module runs a call.
    // rail_slots lays out both ends of every inter-node channel.
    // trace_dir adds the clock alignment's allgathers to the set-up.
    const std::set<std::string> expected = {"slots",
                                            "rail_slots",
                                            "chunk_size",
                                            "node_chunk_size",
                                            "small_msg_max",
                                            "net_alpha_us",
                                            "net_gbps",
                                            "shm_alpha_us",
                                            "shm_gbps",
                                            "reduce_gbps",
                                            "calibrate",
                                            "algorithm",
                                            "rail_unit",
                                            "rail_algorithm",
                                            "logical_nodes",
                                            "device_stage_max",
                                            "reduce_scatter_enable",
                                            "allgather_enable",
                                            "bcast_enable",
                                            "reduce_enable",
                                            "barrier_enable",
                                            "trace_dir"};
    EXPECT_EQ(agreed, expected);
}
