#include "gpu/copy_rate_probe.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>

#include "base/text.h"
#include "gpu/device_memory.h"
#include "gpu/pinned_buffer.h"
#include "gpu/stream.h"

namespace gpurdma::gpu {

namespace {

using Clock = std::chrono::steady_clock;
// A step is short and its best time the one no other process interrupted: it gets more tries.
constexpr int kCopyTries = 4;
constexpr int kStepTries = 16;
// The set-up delays the first call: the measured tries of one kind share this much GPU
// time. A warm-up slower than a try's share is followed by copies of a size that fits
// it; past the budget, no more tries than the warm-up and one measured.
constexpr double kBudgetUs = 20e3;
constexpr size_t kStepBytes = 64;

// What one device's probe found: its rates, or that the driver cannot time them.
struct Known {
    CopyRates rates;
    Status unsupported;  // ok: rates holds them
};

std::mutex &known_mutex()
{
    static std::mutex m;
    return m;
}

std::map<CUdevice, Known> &known()
{
    static std::map<CUdevice, Known> devices;
    return devices;
}

bool lookup(CUdevice device, Known *out)
{
    if (device < 0) return false;
    std::lock_guard<std::mutex> lock(known_mutex());
    const auto it = known().find(device);
    if (it == known().end()) return false;
    *out = it->second;
    return true;
}

void keep(CUdevice device, const Known &found)
{
    if (device < 0) return;
    std::lock_guard<std::mutex> lock(known_mutex());
    known().emplace(device, found);  // the first probe to finish wins; later ones agree within noise
}

Status check_entry_points()
{
    const auto &d = GpuRuntime::instance();
    const auto &a = d.api();
    if (!d.available()) return Status::unsupported(d.why_unavailable());
    if (!a.memcpy_dtoh_async || !a.memcpy_htod_async)
        return Status::unsupported("the CUDA driver lacks cuMemcpyDtoHAsync/cuMemcpyHtoDAsync");
    if (!a.event_create || !a.event_destroy || !a.event_record || !a.event_query || !a.event_elapsed_time)
        return Status::unsupported("the CUDA driver lacks cuEventCreate/Destroy/Record/Query/ElapsedTime");
    return Status::ok();
}

// An event that records GPU time (timing enabled), released in the destructor.
class TimingEvent : private NonCopyable {
public:
    explicit TimingEvent(CUcontext ctx) : ctx_(ctx) {}
    ~TimingEvent()
    {
        if (!event_) return;
        ContextScope scope(ctx_);
        GpuRuntime::instance().api().event_destroy(event_);
    }
    Status create()
    {
        const auto &d = GpuRuntime::instance();
        ContextScope scope(ctx_);
        const int rc = d.api().event_create(&event_, 0);
        if (rc != 0) event_ = nullptr;
        return rc == 0 ? Status::ok() : d.failure("cuEventCreate", rc);
    }
    CUevent get() const { return event_; }

private:
    CUcontext ctx_;
    CUevent event_ = nullptr;
};

}  // namespace

// Declared in the order they go: the events and the stream before the memory.
struct CopyRateProbe::Resources {
    Resources(CUcontext ctx, size_t bytes) : host(bytes, ctx), start(ctx), end(ctx) {}
    std::unique_ptr<DeviceMemory> device;
    PinnedBuffer host;
    std::unique_ptr<Stream> stream;
    TimingEvent start, end;
};

CopyRateProbe::CopyRateProbe(CUcontext ctx, size_t bytes)
    : ctx_(ctx), min_bytes_(std::max(bytes, kStepBytes)), max_bytes_(std::max(bytes, kRateBytes))
{
    start_kind(Kind::Step);
}

CopyRateProbe::~CopyRateProbe()
{
    if (!in_flight_ || !res_ || !res_->stream) return;
    // Nothing of ours may still run when the memory goes.
    const auto &a = GpuRuntime::instance().api();
    ContextScope scope(ctx_);
    if (a.stream_synchronize) a.stream_synchronize(res_->stream->get());
}

Status CopyRateProbe::step(bool *done)
{
    *done = false;
    if (kind_ == Kind::Done) {
        *done = true;
        return failed_;
    }
    if (!res_) {
        const Status opened = open();
        if (!opened.is_ok()) return fail_or(opened, done);
        *done = kind_ == Kind::Done;  // the rates already known
        return *done ? Status::ok() : fail_or(queue_try(), done);
    }
    const auto &d = GpuRuntime::instance();
    const auto &a = d.api();
    float ms = 0;
    {
        ContextScope scope(ctx_);
        const int rc = a.event_query(res_->end.get());
        if (rc == kErrorNotReady) return Status::ok();
        if (rc != 0) return fail_or(d.failure("cuEventQuery", rc), done);
        in_flight_ = false;
        ++finished_tries_;
        const int elapsed = a.event_elapsed_time(&ms, res_->start.get(), res_->end.get());
        if (elapsed != 0) return fail_or(d.failure("cuEventElapsedTime", elapsed), done);
    }
    record_try(static_cast<double>(ms) * 1e3);
    // Another probe of this device may have finished meanwhile.
    Known found;
    if (kind_ != Kind::Done && lookup(device_, &found)) {
        rates_ = found.rates;
        kind_ = Kind::Done;
    }
    if (kind_ != Kind::Done) return fail_or(queue_try(), done);
    *done = true;
    return Status::ok();
}

Status CopyRateProbe::open()
{
    const auto &d = GpuRuntime::instance();
    const auto &a = d.api();
    if (d.available() && a.ctx_get_device) {
        ContextScope scope(ctx_);
        if (a.ctx_get_device(&device_) != 0) device_ = -1;
    }
    Known found;
    if (lookup(device_, &found)) {
        rates_ = found.rates;
        kind_ = Kind::Done;
        return found.unsupported;
    }
    const Status usable = check_entry_points();
    if (!usable.is_ok()) {
        keep(device_, Known{CopyRates{}, usable});
        return usable;
    }
    auto res = std::make_unique<Resources>(ctx_, max_bytes_);
    Status st = DeviceMemory::create(ctx_, max_bytes_, &res->device);
    if (st.is_ok()) st = Stream::create(ctx_, &res->stream);
    if (st.is_ok()) st = res->start.create();
    if (st.is_ok()) st = res->end.create();
    if (st.is_unsupported()) keep(device_, Known{CopyRates{}, st});
    if (st.is_ok()) res_ = std::move(res);
    return st;
}

Status CopyRateProbe::queue_try()
{
    const auto &d = GpuRuntime::instance();
    const auto &a = d.api();
    ContextScope scope(ctx_);
    const CUstream s = res_->stream->get();
    const size_t n = series_.bytes;
    const bool in = kind_ == Kind::H2D;
    const auto t0 = Clock::now();
    in_flight_ = true;
    int rc = a.event_record(res_->start.get(), s);
    if (rc != 0) return d.failure("cuEventRecord", rc);
    rc = in ? a.memcpy_htod_async(res_->device->get(), res_->host.data(), n, s)
            : a.memcpy_dtoh_async(res_->host.data(), res_->device->get(), n, s);
    if (rc != 0) return d.failure(in ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync", rc);
    rc = a.event_record(res_->end.get(), s);
    if (rc != 0) return d.failure("cuEventRecord", rc);
    queue_us_ = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    return Status::ok();
}

void CopyRateProbe::record_try(double gpu_us)
{
    const bool step = kind_ == Kind::Step;
    const int tries = step ? kStepTries : kCopyTries;
    const double us = step ? queue_us_ + gpu_us : gpu_us;  // a copy's rate is the GPU's alone
    Series &s = series_;
    if (s.tries++ == 0) {  // the warm-up: sizes the measured tries to the budget
        const double share = kBudgetUs / tries;
        if (!step && us > share)
            s.bytes = std::max(min_bytes_, static_cast<size_t>(static_cast<double>(s.bytes) * share / us));
    } else {
        s.spent_us += us;
        s.best_us = std::min(s.best_us, us);
        if (step) step_gpu_us_ = std::min(step_gpu_us_, gpu_us);
    }
    if (s.tries < tries && !(s.tries >= 2 && s.spent_us > kBudgetUs)) return;
    switch (kind_) {
        case Kind::Step:
            rates_.step_us = s.best_us;
            start_kind(Kind::D2H);
            break;
        case Kind::D2H:
            rates_.d2h_gbps = copy_gbps(s.bytes, s.best_us, step_gpu_us_);
            start_kind(Kind::H2D);
            break;
        case Kind::H2D:
            // The GPU's own fixed cost of a copy is taken off, not the host's time to queue it.
            rates_.h2d_gbps = copy_gbps(s.bytes, s.best_us, step_gpu_us_);
            kind_ = Kind::Done;
            keep(device_, Known{rates_, Status::ok()});
            break;
        case Kind::Done: break;
    }
}

void CopyRateProbe::start_kind(Kind kind)
{
    kind_ = kind;
    series_ = Series{kind == Kind::Step ? kStepBytes : max_bytes_, 0, 1e300, 0};
}

Status CopyRateProbe::fail_or(const Status &st, bool *done)
{
    if (st.is_ok()) return st;
    kind_ = Kind::Done;
    failed_ = st;
    *done = true;
    return st;
}

std::string CopyRateProbe::describe_wait() const
{
    const char *what = kind_ == Kind::Step ? "a 64-byte copy out" : kind_ == Kind::D2H ? "copies out" : "copies in";
    return std::string("timing this GPU's copies (") + what + " of " + format_bytes(series_.bytes) + ", try " +
           std::to_string(series_.tries + 1) + ") on a stream of its own";
}

}  // namespace gpurdma::gpu
