#include "transport/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>

namespace gpurdma::transport {

namespace {

Status sys_error(const std::string &what, int err)
{
    return Status::error(GPURDMA_ERR_NO_RESOURCE, what + ": " + std::strerror(err));
}

std::string unique_name()
{
    static std::atomic<unsigned> counter{0};
    std::random_device rd;
    const unsigned long long nonce = (static_cast<unsigned long long>(rd()) << 32) ^ rd();
    char name[96];
    std::snprintf(name, sizeof name, "/gpurdma-%u-%d-%u-%016llx", static_cast<unsigned>(getuid()),
                  static_cast<int>(getpid()), counter++, nonce);
    return name;
}

// Maps the open fd and closes it; on failure *base stays null.
Status map_and_close(int fd, size_t bytes, const std::string &name, char **base)
{
    void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int err = errno;
    close(fd);
    if (p == MAP_FAILED) return sys_error("mmap of shared segment " + name, err);
    *base = static_cast<char *>(p);
    return Status::ok();
}

}  // namespace

Status ShmSegment::create(size_t bytes, std::unique_ptr<ShmSegment> *out)
{
    const std::string name = unique_name();
    // O_EXCL|O_NOFOLLOW: never reuse or follow something planted under our name.
    const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return sys_error("shm_open(" + name + ")", errno);
    // posix_fallocate reserves the pages now, so a full /dev/shm fails here and not
    // with SIGBUS in the middle of a collective.
    const int rc = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
    if (rc != 0) {
        close(fd);
        shm_unlink(name.c_str());
        return sys_error("reserving " + std::to_string(bytes) + " bytes of shared memory for " + name, rc);
    }
    char *base = nullptr;
    const Status mapped = map_and_close(fd, bytes, name, &base);
    if (!mapped.is_ok()) {
        shm_unlink(name.c_str());
        return mapped;
    }
    out->reset(new ShmSegment(name, base, bytes, true));
    return Status::ok();
}

Status ShmSegment::attach(const std::string &name, size_t bytes, std::unique_ptr<ShmSegment> *out)
{
    const int fd = shm_open(name.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0) return sys_error("shm_open(" + name + ")", errno);
    struct stat st {};
    if (fstat(fd, &st) != 0 || st.st_uid != getuid() || (st.st_mode & 077) != 0 ||
        static_cast<size_t>(st.st_size) != bytes) {
        close(fd);
        return Status::error(GPURDMA_ERR_NO_RESOURCE, "shared segment " + name + " has the wrong owner, mode or size");
    }
    char *base = nullptr;
    const Status mapped = map_and_close(fd, bytes, name, &base);
    if (!mapped.is_ok()) return mapped;
    out->reset(new ShmSegment(name, base, bytes, false));
    return Status::ok();
}

void ShmSegment::unlink()
{
    if (owner_ && linked_) shm_unlink(name_.c_str());
    linked_ = false;
}

ShmSegment::~ShmSegment()
{
    unlink();
    munmap(base_, bytes_);
}

}  // namespace gpurdma::transport
