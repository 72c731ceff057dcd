// What the panels ask of a session: commands that are queued and answered by snapshots. A local
// Session and a session on a server (engine/remote/remote_session.h) both answer them, so every
// panel works the same on either.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/session/breakpoint.h"

namespace ls {

using CommandTicket = uint64_t;
struct SessionSnapshot;

class SessionControl {
public:
    virtual ~SessionControl() = default;
    virtual CommandTicket set_prompt(std::string text, bool add_special = true, bool parse_special = false) = 0;
    virtual CommandTicket step_op() = 0;
    virtual CommandTicket step_layer() = 0;
    virtual CommandTicket step_token() = 0;
    virtual CommandTicket run_to_event(int64_t index) = 0;
    virtual CommandTicket continue_run() = 0;
    virtual CommandTicket pause() = 0;
    virtual CommandTicket restart() = 0;
    virtual CommandTicket go_to(int64_t index) = 0;
    virtual CommandTicket generate(int n, std::vector<int32_t> forced = {}) = 0;
    // The new breakpoint's id; 0 when it is known only later (a remote session's snapshot shows it).
    virtual int add_breakpoint(BreakpointSpec spec) = 0;
    virtual bool remove_breakpoint(int id) = 0;
    virtual bool enable_breakpoint(int id, bool enabled) = 0;
    // The latest snapshot, never null.
    virtual std::shared_ptr<const SessionSnapshot> snapshot() const = 0;
    // Where the session runs ("CPU (16 threads)"; a remote one says its server too).
    virtual std::string backend_description() const = 0;
};

}  // namespace ls
