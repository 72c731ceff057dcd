// Dry run of a forward pass on the null backend.
#include "engine/session/event_plan.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/session/null_backend.h"
#include "kernels/common/host_memory.h"

namespace ls {

EventInfo event_info(const Event& e) {
    EventInfo info;
    info.index = e.index;
    info.name = e.dump_name();
    info.base_name = e.name;
    info.occurrence = e.occurrence;
    info.layer = e.layer;
    info.op = e.op;
    for (int d = 0; d < 4; ++d) info.ne[d] = e.tensor.ne[d];
    info.decode = e.decode;
    info.ubatch = e.ubatch;
    return info;
}

namespace {

class PlanSink final : public EventSink {
public:
    explicit PlanSink(std::vector<EventInfo>& out) : out_(out) {}
    void on_event(const Event& e) override { out_.push_back(event_info(e)); }

private:
    std::vector<EventInfo>& out_;
};

// Counts events and their f32 bytes.
class CountSink final : public EventSink {
public:
    void on_event(const Event& e) override {
        ++volume.n_events;
        volume.f32_bytes = add_sat(volume.f32_bytes, mul_sat(sizeof(float), static_cast<uint64_t>(e.tensor.n_elements())));
    }
    EventVolume volume;
};

}  // namespace

Result<std::vector<EventInfo>> plan_events(const Model& model, const ForwardOptions& options,
                                           const std::vector<int32_t>& prompt, int n_generated) {
    if (static_cast<int64_t>(prompt.size()) + n_generated > options.n_ctx)
        return make_error(ErrorCode::kUsage, fmt::format("the context is full: {} + {} tokens > n_ctx {}; raise --ctx",
                                                         prompt.size(), n_generated, options.n_ctx));
    std::unique_ptr<Backend> backend = make_null_backend();
    auto forward = make_forward(model, *backend, options);
    if (!forward) return forward.error();
    std::vector<EventInfo> events;
    PlanSink sink(events);
    if (Status s = forward.value()->eval(prompt, &sink); !s) return s.error();
    for (int d = 0; d < n_generated; ++d)
        if (Status s = forward.value()->eval({0}, &sink); !s) return s.error();
    return events;
}

Result<EventVolume> planned_event_volume(const Model& model, const ForwardOptions& options,
                                         const std::vector<int32_t>& prompt, int n_generated) {
    ForwardOptions dry = options;
    dry.n_ctx = std::max<int64_t>(options.n_ctx, static_cast<int64_t>(prompt.size()) + 2);
    std::unique_ptr<Backend> backend = make_null_backend();
    auto forward = make_forward(model, *backend, dry);
    if (!forward) return forward.error();
    CountSink prompt_call, first, second;
    if (Status s = forward.value()->eval(prompt, &prompt_call); !s) return s.error();
    if (n_generated == 0) return prompt_call.volume;
    if (Status s = forward.value()->eval({0}, &first); !s) return s.error();
    if (Status s = forward.value()->eval({0}, &second); !s) return s.error();
    // Generated call d (1-based) is `first` plus (d - 1) times the growth per position.
    const uint64_t n = static_cast<uint64_t>(n_generated);
    const uint64_t growth = second.volume.f32_bytes - first.volume.f32_bytes;
    EventVolume v = prompt_call.volume;
    v.n_events = add_sat(v.n_events, mul_sat(n, first.volume.n_events));
    v.f32_bytes = add_sat(v.f32_bytes, mul_sat(n, first.volume.f32_bytes));
    v.f32_bytes = add_sat(v.f32_bytes, mul_sat(growth, n % 2 == 0 ? (n / 2) * (n - 1) : n * ((n - 1) / 2)));
    return v;
}

}  // namespace ls
