// The flight recorder (obs/flight_recorder.h) and the dump document (obs/dump_service.h):
// the ring keeps the last N calls in order, stages are stamped where they change, a
// reader never sees a torn record while the writer runs, and the dump names them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "gpurdma/gpurdma.h"
#include "obs/dump_service.h"
#include "obs/flight_recorder.h"
#include "plan/schedule.h"

using gpurdma::obs::CallRecord;
using gpurdma::obs::CallState;
using gpurdma::obs::FlightRecorder;

namespace {

// The source of a test call: its number, from which the fill makes count and bytes.
void fill(const void *source, CallRecord *c)
{
    const uint64_t seq = *static_cast<const uint64_t *>(source);
    c->count = seq * 3;
    c->bytes = seq * 12;
}

void one_call(FlightRecorder &r, uint64_t seq, CallState end = CallState::Done)
{
    r.open(seq, &seq, fill);
    r.publish_open();
    r.close(seq, end);
}

}  // namespace

TEST(FlightRecorder, WithoutAHistoryOnlyANotedCallInFlight)
{
    FlightRecorder r("c", 0, 2, 0);
    EXPECT_FALSE(r.history());
    for (uint64_t seq = 1; seq <= 3; ++seq) one_call(r, seq);
    FlightRecorder::Snapshot s = r.snapshot();
    EXPECT_TRUE(s.calls.empty());  // calls that ended at once: nothing but the count
    EXPECT_EQ(s.calls_begun, 3u);
    uint64_t seq = 4;
    r.open(seq, &seq, fill);
    r.note_wait("node allreduce, waiting for rank 1", 0.5);  // the fill runs now
    s = r.snapshot();
    ASSERT_EQ(s.calls.size(), 1u);
    EXPECT_EQ(s.calls[0].seq, 4u);
    EXPECT_EQ(s.calls[0].count, 12u);
    EXPECT_EQ(s.calls[0].state, CallState::InFlight);
    EXPECT_EQ(s.waiting_seq, 4u);
    r.close(4, CallState::Done);  // seen in flight: its end is published too
    s = r.snapshot();
    ASSERT_EQ(s.calls.size(), 1u);
    EXPECT_EQ(s.calls[0].state, CallState::Done);
    EXPECT_EQ(s.waiting_seq, 0u);
}

TEST(FlightRecorder, KeepsTheLastCallsInOrder)
{
    FlightRecorder r("c", 1, 4, 4);
    for (uint64_t seq = 1; seq <= 10; ++seq) one_call(r, seq);
    const FlightRecorder::Snapshot s = r.snapshot();
    ASSERT_EQ(s.calls.size(), 4u);
    for (size_t i = 0; i < 4; ++i) {
        EXPECT_EQ(s.calls[i].seq, 7 + i);
        EXPECT_EQ(s.calls[i].count, (7 + i) * 3);
        EXPECT_EQ(s.calls[i].state, CallState::Done);
        EXPECT_GE(s.calls[i].end, s.calls[i].begin);
    }
    EXPECT_EQ(s.rank, 1);
    EXPECT_EQ(s.size, 4);
}

TEST(FlightRecorder, TheDepthIsAPowerOfTwo)
{
    FlightRecorder r("c", 0, 2, 5);  // rounded up to 8
    for (uint64_t seq = 1; seq <= 20; ++seq) one_call(r, seq);
    const FlightRecorder::Snapshot s = r.snapshot();
    ASSERT_EQ(s.calls.size(), 8u);
    EXPECT_EQ(s.calls.front().seq, 13u);
    EXPECT_EQ(s.calls.back().seq, 20u);
}

TEST(FlightRecorder, ACallThatEndsAtOnceIsNotTimed)
{
    FlightRecorder r("c", 0, 2, 8);
    one_call(r, 1);
    const CallRecord c = r.snapshot().calls.at(0);
    EXPECT_EQ(c.begin, 0u);  // no clock read on the latency path
    EXPECT_EQ(c.end, 0u);
    EXPECT_EQ(c.stages, 0);
    r.set_stamp_all(true);  // a trace: every call timed
    one_call(r, 2);
    const CallRecord t = r.snapshot().calls.at(1);
    EXPECT_GT(t.begin, 0u);
    EXPECT_GE(t.end, t.begin);
    EXPECT_EQ(t.bytes, 24u);
}

TEST(FlightRecorder, StagesAreStampedWhereTheyChange)
{
    FlightRecorder r("c", 0, 2, 8);
    uint64_t one = 1;
    r.open(1, &one, fill);
    r.publish_open();
    const auto rs = static_cast<uint8_t>(gpurdma::plan::Phase::NodeReduceScatter);
    const auto ring = static_cast<uint8_t>(gpurdma::plan::Phase::RingReduceScatter);
    r.note_stage(rs, 1);
    r.note_stage(ring, 3);
    {
        const CallRecord c = r.snapshot().calls.at(0);
        EXPECT_EQ(c.state, CallState::InFlight);
        ASSERT_EQ(c.stages, 2);
        EXPECT_GT(c.stage[0].end, 0u);  // left for the ring
        EXPECT_EQ(c.stage[1].end, 0u);  // running
        EXPECT_EQ(c.stage[1].peer, 3);
    }
    r.note_stage(rs, 1);  // back to a stage seen before: the same span, reopened
    r.close(2, CallState::Done);  // another call's number: nothing
    EXPECT_EQ(r.snapshot().calls.at(0).state, CallState::InFlight);
    r.close(1, CallState::Failed);
    const CallRecord c = r.snapshot().calls.at(0);
    EXPECT_EQ(c.state, CallState::Failed);
    ASSERT_EQ(c.stages, 2);
    for (int i = 0; i < 2; ++i) EXPECT_GE(c.stage[i].end, c.stage[i].begin);
    EXPECT_EQ(c.stage[0].phase, rs);
}

TEST(FlightRecorder, AWaitNoteLastsWhileItsCallRuns)
{
    FlightRecorder r("c", 0, 2, 8);
    uint64_t five = 5;
    r.open(5, &five, fill);
    r.publish_open();
    r.note_wait("ring reduce-scatter (inter-node), waiting for data from rank 1", 2.5);
    FlightRecorder::Snapshot s = r.snapshot();
    EXPECT_EQ(s.waiting_seq, 5u);
    EXPECT_EQ(s.waiting_idle_s, 2.5);
    r.close(5, CallState::Done);
    s = r.snapshot();
    EXPECT_EQ(s.waiting_seq, 0u);
    EXPECT_TRUE(s.waiting_in.empty());
}

TEST(FlightRecorder, AReaderNeverSeesATornRecord)
{
    FlightRecorder r("c", 0, 2, 16);
    std::atomic<bool> done{false};
    std::thread writer([&] {
        for (uint64_t seq = 1; seq <= 200000; ++seq) one_call(r, seq);
        done = true;
    });
    size_t snapshots = 0;
    while (!done.load() || snapshots == 0) {
        for (const CallRecord &c : r.snapshot().calls) {
            ASSERT_EQ(c.count, c.seq * 3);
            ASSERT_TRUE(c.state == CallState::InFlight || c.state == CallState::Done);
        }
        ++snapshots;
    }
    writer.join();
    EXPECT_EQ(r.snapshot().calls.back().seq, 200000u);
}

TEST(DumpService, TheDocumentNamesTheCallsAndTheWait)
{
    FlightRecorder r("MPI_COMM_WORLD (cid 0)", 2, 4, 8);
    gpurdma::obs::DumpService &service = gpurdma::obs::DumpService::instance();
    service.add(&r);
    r.open(3, nullptr, [](const void *, CallRecord *c) {
        c->count = 1000;
        c->dtype = GPURDMA_INT32;
        c->op = GPURDMA_SUM;
    });
    r.publish_open();
    r.note_wait("node allreduce, waiting for rank 1 on host b", 1.5);
    const std::string doc = service.document("test");
    service.remove(&r);
    EXPECT_NE(doc.find("\"format\": \"gpurdma-dump 1\""), std::string::npos) << doc;
    EXPECT_NE(doc.find("\"name\": \"MPI_COMM_WORLD (cid 0)\", \"rank\": 2, \"size\": 4"), std::string::npos) << doc;
    EXPECT_NE(doc.find("\"seq\": 3, \"collective\": \"allreduce\", \"count\": 1000"), std::string::npos) << doc;
    EXPECT_NE(doc.find("\"datatype\": \"int32\", \"op\": \"sum\""), std::string::npos) << doc;
    EXPECT_NE(doc.find("\"state\": \"in flight\""), std::string::npos) << doc;
    EXPECT_NE(doc.find("\"in\": \"node allreduce, waiting for rank 1 on host b\""), std::string::npos) << doc;
    EXPECT_EQ(service.document("test").find("cid 0"), std::string::npos);  // removed
}

TEST(DumpService, WritesOneFilePerProcessIntoItsFolder)
{
    char dir[] = "/tmp/gpurdma-dump-test.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    const std::string folder = std::string(dir) + "/dumps";
    std::string why;
    const std::string path = gpurdma::obs::DumpService::instance().write_to(folder, "test", &why);
    ASSERT_FALSE(path.empty()) << why;
    EXPECT_EQ(path.rfind(folder + "/gpurdma-", 0), 0u) << path;
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_NE(text.str().find("\"reason\": \"test\""), std::string::npos);
    EXPECT_NE(text.str().find("\"pid\": " + std::to_string(getpid())), std::string::npos);
    std::remove(path.c_str());
    rmdir(folder.c_str());
    rmdir(dir);
}
