// Dry run of a forward pass on the null backend.
#include "engine/session/event_plan.h"

#include "engine/session/null_backend.h"

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

}  // namespace

Result<std::vector<EventInfo>> plan_events(const Model& model, const ForwardOptions& options,
                                           const std::vector<int32_t>& prompt, int n_generated) {
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

}  // namespace ls
