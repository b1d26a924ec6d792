// ShmSegment: private (0600), job-unique names, no planted file or symlink is ever
// used, and the name goes away on unlink() or destruction.
#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>

#include "transport/shm_segment.h"

using gpurdma::Status;
using gpurdma::transport::ShmSegment;

namespace {

std::unique_ptr<ShmSegment> create(size_t bytes)
{
    std::unique_ptr<ShmSegment> segment;
    const Status st = ShmSegment::create(bytes, &segment);
    EXPECT_TRUE(st.is_ok()) << st.message();
    return segment;
}

std::unique_ptr<ShmSegment> attach(const std::string &name, size_t bytes)
{
    std::unique_ptr<ShmSegment> segment;
    const Status st = ShmSegment::attach(name, bytes, &segment);
    EXPECT_TRUE(st.is_ok()) << st.message();
    return segment;
}

// Whether attaching is refused (and then nothing was attached).
bool attach_refused(const std::string &name, size_t bytes)
{
    std::unique_ptr<ShmSegment> segment;
    const Status st = ShmSegment::attach(name, bytes, &segment);
    return !st.is_ok() && !segment && !st.message().empty();
}

std::string shm_path(const std::string &name)
{
    return "/dev/shm" + name;
}

bool exists(const std::string &name)
{
    struct stat st {};
    return lstat(shm_path(name).c_str(), &st) == 0;
}

// Names in /dev/shm made by this process's segments (gpurdma-<uid>-<pid>-...).
int own_entries()
{
    const std::string prefix = "gpurdma-" + std::to_string(getuid()) + "-" + std::to_string(getpid()) + "-";
    int n = 0;
    DIR *d = opendir("/dev/shm");
    if (!d) return -1;
    while (dirent *e = readdir(d))
        if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) ++n;
    closedir(d);
    return n;
}

// A test-owned name, removed on scope exit.
struct Planted {
    std::string name;
    explicit Planted(const std::string &tag) : name("/gpurdma-unittest-" + std::to_string(getpid()) + "-" + tag) {}
    ~Planted() { ::unlink(shm_path(name).c_str()); }
};

}  // namespace

TEST(ShmSegment, CreatedPrivateWithJobUniqueName)
{
    const int before = own_entries();
    auto a = create(1 << 16);
    auto b = create(1 << 16);
    ASSERT_NE(a->name(), b->name());
    const std::string prefix = "/gpurdma-" + std::to_string(getuid()) + "-" + std::to_string(getpid()) + "-";
    EXPECT_EQ(a->name().compare(0, prefix.size(), prefix), 0) << a->name();
    // A random part follows the counter: a name cannot be guessed from uid and pid alone.
    EXPECT_GE(a->name().size(), prefix.size() + 2 + 16) << a->name();
    struct stat st {};
    ASSERT_EQ(lstat(shm_path(a->name()).c_str(), &st), 0);
    EXPECT_TRUE(S_ISREG(st.st_mode));
    EXPECT_EQ(st.st_mode & 07777, 0600u);
    EXPECT_EQ(st.st_uid, getuid());
    EXPECT_EQ(static_cast<size_t>(st.st_size), static_cast<size_t>(1 << 16));
    EXPECT_EQ(own_entries(), before + 2);
    a.reset();
    b.reset();
    EXPECT_EQ(own_entries(), before);
}

TEST(ShmSegment, NamesDifferAcrossManyCreates)
{
    std::set<std::string> names;
    for (int i = 0; i < 64; ++i) names.insert(create(4096)->name());
    EXPECT_EQ(names.size(), 64u);
}

TEST(ShmSegment, AttachSharesMemoryAndUnlinkLeavesMappingValid)
{
    auto owner = create(8192);
    auto peer = attach(owner->name(), 8192);
    std::strcpy(owner->base() + 100, "hello");
    EXPECT_STREQ(peer->base() + 100, "hello");
    const std::string name = owner->name();
    owner->unlink();
    EXPECT_FALSE(exists(name));
    owner->unlink();  // idempotent
    // The mappings outlive the name.
    std::strcpy(peer->base() + 200, "still here");
    EXPECT_STREQ(owner->base() + 200, "still here");
    // Nobody can attach any more.
    EXPECT_TRUE(attach_refused(name, 8192));
}

TEST(ShmSegment, PeerDestructionDoesNotUnlink)
{
    auto owner = create(4096);
    attach(owner->name(), 4096).reset();
    EXPECT_TRUE(exists(owner->name()));
    const std::string name = owner->name();
    owner.reset();
    EXPECT_FALSE(exists(name));
}

TEST(ShmSegment, AttachRefusesSymlink)
{
    Planted target("target"), link("link");
    const int fd = open(shm_path(target.name).c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, 4096), 0);
    close(fd);
    ASSERT_EQ(symlink(shm_path(target.name).c_str(), shm_path(link.name).c_str()), 0);
    EXPECT_TRUE(attach_refused(link.name, 4096));
    // Through the real name it would be accepted: the refusal is the symlink's.
    EXPECT_NE(nullptr, attach(target.name, 4096));
}

TEST(ShmSegment, AttachRefusesWrongModeOrSize)
{
    Planted open_mode("mode");
    const int fd = open(shm_path(open_mode.name).c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, 4096), 0);
    ASSERT_EQ(fchmod(fd, 0644), 0);
    close(fd);
    EXPECT_TRUE(attach_refused(open_mode.name, 4096));

    auto owner = create(4096);
    EXPECT_TRUE(attach_refused(owner->name(), 8192));
    EXPECT_TRUE(attach_refused("/gpurdma-no-such-segment-" + std::to_string(getpid()), 4096));
}

TEST(ShmSegment, FailedCreateLeavesNothing)
{
    const int before = own_entries();
    // Far more than /dev/shm holds: posix_fallocate fails and the name is removed.
    std::unique_ptr<ShmSegment> s;
    const Status st = ShmSegment::create(size_t(1) << 50, &s);
    ASSERT_FALSE(st.is_ok()) << "a 1 PiB segment was created";
    EXPECT_FALSE(s);
    EXPECT_NE(st.message().find("shared memory"), std::string::npos) << st.message();
    EXPECT_EQ(own_entries(), before);
}
