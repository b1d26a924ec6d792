#include <cstring>

#include "gpurdma/gpurdma.h"

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
    config->spin_us = 20.0;
    config->gdr_level = "PXB";
    config->log = nullptr;
}
