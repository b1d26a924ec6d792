// Little-endian-agnostic (same-architecture) serialization of set-up records.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace gpurdma::wire {

class Writer {
public:
    void u32(uint32_t v) { raw(&v, sizeof v); }
    void u64(uint64_t v) { raw(&v, sizeof v); }
    void str(const std::string &s)
    {
        u32(static_cast<uint32_t>(s.size()));
        out_ += s;
    }
    std::string take() { return std::move(out_); }

private:
    void raw(const void *p, size_t n) { out_.append(static_cast<const char *>(p), n); }
    std::string out_;
};

// Every read checks bounds: a short or corrupt record fails instead of overrunning.
class Reader {
public:
    explicit Reader(const std::string &in) : in_(in) {}
    bool u32(uint32_t *v) { return raw(v, sizeof *v); }
    bool u64(uint64_t *v) { return raw(v, sizeof *v); }
    bool str(std::string *s)
    {
        uint32_t n = 0;
        if (!u32(&n) || n > in_.size() - pos_) return false;
        s->assign(in_, pos_, n);
        pos_ += n;
        return true;
    }

private:
    bool raw(void *p, size_t n)
    {
        if (n > in_.size() - pos_) return false;
        std::memcpy(p, in_.data() + pos_, n);
        pos_ += n;
        return true;
    }
    const std::string &in_;
    size_t pos_ = 0;
};

}  // namespace gpurdma::wire
