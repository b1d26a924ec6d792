// The core's one error convention: a function that can fail returns a Status, which
// carries the C API's code and a message naming the stage and the peer. Exceptions
// do not cross layers: whatever can throw (allocation, the standard library) is
// caught at the C API (core/api.cpp).
#pragma once

#include <string>
#include <utility>

#include "gpurdma/gpurdma.h"

namespace gpurdma {

class [[nodiscard]] Status {
public:
    Status() = default;  // success
    static Status ok() { return Status(); }
    static Status error(gpurdma_status_t code, std::string message)
    {
        return Status(code == GPURDMA_OK ? GPURDMA_ERR_TRANSPORT : code, std::move(message));
    }
    // The same answer on every rank, before anything moved: the caller hands the call on.
    static Status unsupported(std::string why) { return Status(GPURDMA_ERR_UNSUPPORTED, std::move(why)); }

    bool is_ok() const { return code_ == GPURDMA_OK; }
    bool is_unsupported() const { return code_ == GPURDMA_ERR_UNSUPPORTED; }
    gpurdma_status_t code() const { return code_; }
    const std::string &message() const { return message_; }

    // The same failure with context in front: "device set-up: " + message.
    Status prefixed(const std::string &context) const { return is_ok() ? *this : Status(code_, context + message_); }

private:
    Status(gpurdma_status_t code, std::string message) : code_(code), message_(std::move(message)) {}
    gpurdma_status_t code_ = GPURDMA_OK;
    std::string message_;
};

}  // namespace gpurdma
