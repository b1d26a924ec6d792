// The CUDA driver, loaded at run time only where it exists (dlopen libcuda.so.1):
// the component loads and works on hosts without CUDA, and recognises device
// pointers (which a non-CUDA-aware Open MPI hands over as raw addresses) where it
// does. Nothing here needs the CUDA toolkit to build.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace gpurdma::mem {

enum class MemoryKind { Host, Device, Managed };

struct PointerInfo {
    MemoryKind kind = MemoryKind::Host;
    uint64_t buffer_id = 0;  // unique per allocation: a freed and reused address gets a new one
    void *context = nullptr; // CUcontext the memory belongs to
};

class CudaDriver {
public:
    // The process-wide driver; loads it on first use unless disabled.
    static CudaDriver &instance();

    // Disables loading (coll_gpurdma_cuda=0); must come before the first query.
    static void disable();

    bool available() const { return ok_; }
    const std::string &why_unavailable() const { return why_; }

    // Host for anything the driver does not know (or when it is not available).
    PointerInfo query(const void *ptr) const;

    // cuMemcpy with unified addressing, in the context of the device buffer involved.
    bool copy(void *dst, const void *src, size_t bytes, void *context, std::string *error) const;

private:
    CudaDriver();
    bool ok_ = false;
    std::string why_;
    void *lib_ = nullptr;
    int (*pointer_get_attributes_)(unsigned, int *, void **, unsigned long long) = nullptr;
    int (*memcpy_)(unsigned long long, unsigned long long, size_t) = nullptr;
    int (*ctx_push_)(void *) = nullptr;
    int (*ctx_pop_)(void **) = nullptr;
    int (*error_string_)(int, const char **) = nullptr;
};

}  // namespace gpurdma::mem
