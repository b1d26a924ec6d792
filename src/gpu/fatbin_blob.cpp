// The kernels' images, embedded as bytes by the assembler (.incbin), so the component is
// one .so that carries its kernels and links no GPU library: nvcc's fatbin and hipcc's
// AMD code-object bundle. Built without a vendor's compiler, its blob is empty and the
// device path declines on that vendor's GPUs.
#include "gpu/kernel_module.h"

#ifdef GPURDMA_HAVE_FATBIN
#include "reduce/reduce_kernels_fatbin.h"  // generated: GPURDMA_FATBIN_PATH
#endif
#ifdef GPURDMA_HAVE_HIP_CODE
#include "reduce/reduce_kernels_hip.h"  // generated: GPURDMA_HIP_CODE_PATH
#endif

// NAME_begin..NAME_end: the file at PATH, in a read-only section of its own, aligned.
#define GPURDMA_EMBED_FILE(name, path, align)                                            \
    __asm__(".pushsection .rodata." #name                                                \
            ",\"a\",@progbits\n"                                                         \
            ".balign " #align                                                            \
            "\n"                                                                         \
            ".globl " #name                                                              \
            "_begin\n"                                                                   \
            ".hidden " #name "_begin\n" #name                                            \
            "_begin:\n"                                                                  \
            ".incbin \"" path                                                            \
            "\"\n"                                                                       \
            ".globl " #name                                                              \
            "_end\n"                                                                     \
            ".hidden " #name "_end\n" #name                                              \
            "_end:\n"                                                                    \
            ".popsection\n");                                                            \
    extern "C" __attribute__((visibility("hidden"))) const unsigned char name##_begin[]; \
    extern "C" __attribute__((visibility("hidden"))) const unsigned char name##_end[];

#ifdef GPURDMA_FATBIN_PATH
GPURDMA_EMBED_FILE(gpurdma_fatbin, GPURDMA_FATBIN_PATH, 64)
#endif
#ifdef GPURDMA_HIP_CODE_PATH
// Page-aligned: cheap, and more than any section of the bundle's code objects asks for.
GPURDMA_EMBED_FILE(gpurdma_hip_code, GPURDMA_HIP_CODE_PATH, 4096)
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

EmbeddedImage embedded_hip_kernels()
{
#ifdef GPURDMA_HIP_CODE_PATH
    return {gpurdma_hip_code_begin, static_cast<size_t>(gpurdma_hip_code_end - gpurdma_hip_code_begin)};
#else
    return {nullptr, 0};
#endif
}

}  // namespace gpurdma::gpu
