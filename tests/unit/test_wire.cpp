#include <gtest/gtest.h>

#include "setup/wire.h"

using namespace gpurdma::wire;

TEST(Wire, RoundTrip)
{
    Writer w;
    w.u32(7);
    w.u64(0x1122334455667788ull);
    w.str(std::string("abc\0def", 7));
    w.str("");
    const std::string blob = w.take();
    Reader r(blob);
    uint32_t a = 0;
    uint64_t b = 0;
    std::string c, d = "x";
    ASSERT_TRUE(r.u32(&a));
    ASSERT_TRUE(r.u64(&b));
    ASSERT_TRUE(r.str(&c));
    ASSERT_TRUE(r.str(&d));
    EXPECT_EQ(a, 7u);
    EXPECT_EQ(b, 0x1122334455667788ull);
    EXPECT_EQ(c, std::string("abc\0def", 7));
    EXPECT_EQ(d, "");
    EXPECT_FALSE(r.u32(&a));
}

TEST(Wire, TruncatedOrCorruptFails)
{
    Writer w;
    w.str("hello");
    std::string blob = w.take();
    for (size_t cut = 0; cut < blob.size(); ++cut) {
        const std::string part = blob.substr(0, cut);
        Reader r(part);
        std::string s;
        EXPECT_FALSE(r.str(&s)) << cut;
    }
    blob[0] = static_cast<char>(0xff);  // length far beyond the data
    Reader r(blob);
    std::string s;
    EXPECT_FALSE(r.str(&s));
}
