// The process-wide state behind gpurdma_context_t.
#pragma once

#include <memory>
#include <string>

#include "core/logger.h"
#include "gpurdma/gpurdma.h"
#include "plan/planner.h"
#include "transport/ucx_context.h"

struct gpurdma_context {
    gpurdma_config_t config;     // string fields point into the members below
    std::string algorithm_text;
    std::string ucx_tls;
    gpurdma::plan::PlanParams plan;
    gpurdma::Logger log;
    std::unique_ptr<gpurdma::transport::UcxContext> ucx;

    explicit gpurdma_context(const gpurdma_config_t &c);
};
