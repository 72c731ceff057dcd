// What every debugger panel reads and how it talks back: the latest session snapshot (immutable),
// the one cursor all panels follow, and the session to send commands to.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/session/session.h"
#include "engine/session/tensor_history.h"

namespace ls::views {

struct RemoteEvents;

// Which snapshot a panel's figures were read from, without holding the snapshot (a held snapshot
// would keep captures alive that the session's budget has let go): its plan, held (a later plan
// cannot take its address), and its version, which grows with every publication of that plan.
struct SnapshotKey {
    std::shared_ptr<const std::vector<EventInfo>> events;
    uint64_t version = UINT64_MAX;

    bool is(const SessionSnapshot* s) const { return s && s->events == events && s->version == version; }
    void set(const SessionSnapshot* s) {
        events = s ? s->events : nullptr;
        version = s ? s->version : UINT64_MAX;
    }
};

struct DebugContext {
    // Never null while a model or a capture is open; an empty snapshot otherwise.
    std::shared_ptr<const SessionSnapshot> snap;
    // The live session (here or on a server), or nullptr when a capture (a dump) is opened without
    // its model: panels then show what the capture holds and offer no commands.
    SessionControl* session = nullptr;
    const Model* model = nullptr;              // nullptr without a model
    const ReferenceDump* reference = nullptr;  // the loaded reference, if any
    std::string reference_path;
    // Local vs inherited error of the warn/diverged events, by event index (local_origin,
    // local_nmse; engine/compare/local_error.h); nullptr when not computed (no model or reference).
    const std::vector<EventComparison>* local_errors = nullptr;
    uint64_t local_errors_generation = 0;  // grows whenever *local_errors is rebuilt
    // A session on a server: where its events' values are (nullptr for a local session or a capture).
    std::shared_ptr<RemoteEvents> remote;
    // The reference is the run of another format of the same model (--against-model): every weight
    // has an error of its own, none of them is "the bug".
    bool two_formats = false;

    // The selected event: the one cursor every panel follows. Panels change it with select();
    // the main view applies the request after the frame.
    int64_t cursor = -1;
    int64_t requested_cursor = -2;
    void select(int64_t index) { requested_cursor = index; }
    // A coordinate to follow in the tensor history panel (the tensor inspector's values ask).
    std::optional<HistoryCoord> requested_history;

    // One line for the app's state log (tests read it) and the status bar.
    std::function<void(const std::string&)> log = [](const std::string&) {};

    // The event the panels look at: the cursor's, or the session's before anything is selected.
    const EventInfo* focus() const {
        if (!snap) return nullptr;
        return event(cursor >= 0 ? cursor : snap->cursor);
    }
    const EventInfo* event(int64_t index) const {
        if (!snap || !snap->events || index < 0 || index >= static_cast<int64_t>(snap->events->size())) return nullptr;
        return &(*snap->events)[static_cast<size_t>(index)];
    }
    const EventRecord* record(int64_t index) const { return snap ? snap->record(index) : nullptr; }
    // The local-error verdict of event `index`; nullptr when none was computed.
    const EventComparison* local_error(int64_t index) const {
        if (!local_errors || index < 0 || index >= static_cast<int64_t>(local_errors->size())) return nullptr;
        const EventComparison& c = (*local_errors)[static_cast<size_t>(index)];
        return c.local_origin == LocalOrigin::kNotComputed ? nullptr : &c;
    }
    std::shared_ptr<const CapturedTensor> capture(int64_t index) const {
        return snap ? snap->capture(index) : nullptr;
    }
};

// Opens a panel's window: untitled and fixed, for the workspace tiles it (its tab carries the title
// and the close button); false when there is nothing to draw (the caller still calls End).
bool begin_panel(const char* title, bool* open);

// Opens a panel's window for the focused event: nullptr when the window is closed or collapsed, or
// when nothing has run yet (the window then says `before_run`); both close the window. Otherwise
// the caller draws and ends the window.
const EventInfo* begin_event_panel(DebugContext& ctx, const char* title, bool* open, const char* before_run);

}  // namespace ls::views
