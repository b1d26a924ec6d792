// Owners of a resource (segment, registration, endpoint, stream, team) derive from
// this: they are created by a factory, held by pointer and never copied.
#pragma once

namespace gpurdma {

class NonCopyable {
public:
    NonCopyable(const NonCopyable &) = delete;
    NonCopyable &operator=(const NonCopyable &) = delete;

protected:
    NonCopyable() = default;
    ~NonCopyable() = default;
};

}  // namespace gpurdma
