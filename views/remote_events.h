// A session on a server (engine/remote, adapted by the app): its events' values, and what is
// worked out from the model's weights, are there. The panels reach them through this.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/capture/export.h"
#include "engine/compare/snapshot_diagnosis.h"

namespace ls::views {

struct RemoteEvents {
    virtual ~RemoteEvents() = default;
    // Writes events `events` (indices) to options.path on this machine, fetching each; events the
    // server holds no values of are counted in `skipped`.
    virtual Result<ExportSummary> export_here(const std::vector<int64_t>& events, const ExportOptions& options,
                                              size_t* skipped) = 0;
    // Writes the events named (dump names) to options.path on the server's disk: what was written.
    virtual Result<std::string> export_on_server(const std::vector<std::string>& names, const ExportOptions& options) = 0;
    // Asks the server for the logit lens of its snapshot as it stands (it holds the output head's
    // weights and the reference); the answer replaces any earlier one. Never waits.
    virtual void ask_lens() = 0;
    // The newest lens asked for: null before any, or while the server works on it (*pending).
    virtual std::shared_ptr<const SnapshotLens> lens(bool* pending) const = 0;
    // Asks the server for a weight's bytes as the model file stores them (the client holds the
    // tensor table alone); kept here once come. Never waits.
    virtual void fetch_weight(const std::string& name) = 0;
    // Its bytes once here; null while on its way (*pending) or after a failure (*error says why).
    virtual std::shared_ptr<const std::string> weight(const std::string& name, bool* pending, std::string* error) const = 0;
};

}  // namespace ls::views
