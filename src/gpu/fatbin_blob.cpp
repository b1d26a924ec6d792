// The CUDA kernels' fatbin, embedded as bytes by the assembler (.incbin), so the
// component is one .so that carries its kernels and links no CUDA library. Built
// without CUDA, the blob is empty and the device path declines.
#include "gpu/kernel_module.h"

#ifdef GPURDMA_HAVE_FATBIN
#include "reduce/reduce_kernels_fatbin.h"  // generated: GPURDMA_FATBIN_PATH
#endif

#ifdef GPURDMA_FATBIN_PATH
__asm__(
    ".pushsection .rodata.gpurdma_fatbin,\"a\",@progbits\n"
    ".balign 64\n"
    ".globl gpurdma_fatbin_begin\n"
    ".hidden gpurdma_fatbin_begin\n"
    "gpurdma_fatbin_begin:\n"
    ".incbin \"" GPURDMA_FATBIN_PATH
    "\"\n"
    ".globl gpurdma_fatbin_end\n"
    ".hidden gpurdma_fatbin_end\n"
    "gpurdma_fatbin_end:\n"
    ".popsection\n");
extern "C" __attribute__((visibility("hidden"))) const unsigned char gpurdma_fatbin_begin[];
extern "C" __attribute__((visibility("hidden"))) const unsigned char gpurdma_fatbin_end[];
#endif

namespace gpurdma::gpu {

EmbeddedImage embedded_kernels()
{
#ifdef GPURDMA_FATBIN_PATH
    return {gpurdma_fatbin_begin, static_cast<size_t>(gpurdma_fatbin_end - gpurdma_fatbin_begin)};
#else
    return {nullptr, 0};
#endif
}

}  // namespace gpurdma::gpu
