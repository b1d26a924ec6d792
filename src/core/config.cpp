#include <cstring>

#include "gpurdma/gpurdma.h"
#include "plan/cost_model.h"

extern "C" void gpurdma_config_default(gpurdma_config_t *config)
{
    std::memset(config, 0, sizeof *config);
    config->verbose = 0;
    config->chunk_size = 256 * 1024;
    config->slots = 4;
    config->small_msg_max = 64 * 1024;
    config->node_chunk_size = 256 * 1024;
    config->timeout_s = 60.0;
    config->algorithm = "auto";
    config->ucx_tls = "";
    config->logical_nodes = "";
    config->net_devices = "";
    config->cuda = 1;
    config->local_rank = -1;
    config->spin_us = 20.0;
    config->calibrate = 0;
    const gpurdma::plan::CostModel model;
    config->net_alpha_us = model.net.alpha_us;
    config->net_gbps = model.net.gbps;
    config->shm_alpha_us = model.shm.alpha_us;
    config->shm_gbps = model.shm.gbps;
    config->reduce_gbps = model.reduce_gbps;
    config->gdr_level = "PXB";
    config->ib_gid_index = -1;
    config->ib_tc = -1;
    config->ib_sl = -1;
    config->log = nullptr;
}
