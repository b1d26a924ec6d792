// libFuzzer target: the set-up record reader (src/setup/wire.h) on arbitrary bytes,
// reading the two record layouts gpurdma exchanges (round 1: u32 u32 u64 str str;
// round 2: u32 str str u64 str). Every read must stay in bounds (ASan checks) and a
// record that reads fully must round-trip through the Writer byte for byte.
#include <cstdint>
#include <string>

#include "setup/wire.h"

#define CHECK(c)                    \
    do {                            \
        if (!(c)) __builtin_trap(); \
    } while (0)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const std::string in(reinterpret_cast<const char *>(data), size);
    {
        gpurdma::wire::Reader r(in);
        uint32_t version = 0, slots = 0;
        uint64_t chunk = 0;
        std::string host, device;
        if (r.u32(&version) && r.u32(&slots) && r.u64(&chunk) && r.str(&host) && r.str(&device)) {
            gpurdma::wire::Writer w;
            w.u32(version);
            w.u32(slots);
            w.u64(chunk);
            w.str(host);
            w.str(device);
            const std::string out = w.take();
            CHECK(out.size() <= in.size() && in.compare(0, out.size(), out) == 0);
        }
    }
    {
        gpurdma::wire::Reader r(in);
        uint32_t ok = 0;
        uint64_t base = 0;
        std::string segment, address, key;
        if (r.u32(&ok) && r.str(&segment) && r.str(&address) && r.u64(&base) && r.str(&key))
            CHECK(segment.size() + address.size() + key.size() + 24 <= in.size());
    }
    return 0;
}
