// Tensor inspector for the event at the cursor: shape, stats and histogram (ours over the
// reference's), the comparison metrics, and our values beside the reference's with their difference.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "views/debug_context.h"

namespace ls::views {


struct TensorInspector {
    bool open = true;
    bool sort_by_difference = false;  // values grid: largest |ours - reference| first

    // Usage (main view): `TensorInspector inspector; ... inspector.draw(ctx);` every frame; it
    // follows ctx.cursor. Kept apart from TensorPanel (the model's weights), which stays as it is.
    void draw(DebugContext& ctx);

    // What the grid pairs ours with (tests read it).
    enum class RefMode { kNone, kFull, kAligned, kPartial };
    RefMode ref_mode() const { return ref_mode_; }
    bool has_reference_stats() const { return has_ref_stats_; }

private:
    void refresh(const DebugContext& ctx);
    void draw_header(const DebugContext& ctx, const EventInfo& e, const EventRecord* r);
    void draw_metrics(const EventRecord& r);
    void draw_values(DebugContext& ctx);
    std::string reference_text(int64_t row, float* ref_out) const;

    // Cache key: rebuilt when the cursor, its record, its capture or the reference changes.
    int64_t event_ = -2;
    const EventRecord* record_ = nullptr;
    const CapturedTensor* capture_key_ = nullptr;
    const ReferenceDump* reference_ = nullptr;

    std::shared_ptr<const CapturedTensor> capture_;
    RefMode ref_mode_ = RefMode::kNone;
    std::string ref_name_, ref_note_;
    std::vector<float> ref_values_;                        // kFull: by our flat index
    std::vector<float> aligned_ours_, aligned_ref_;         // kAligned: paired values
    std::vector<std::pair<int64_t, float>> ref_samples_;    // kPartial: sorted by flat index
    TensorStats ref_stats_;
    bool has_ref_stats_ = false;
    std::vector<int64_t> order_;                            // grid rows when sorted by difference
    bool order_sorted_ = false;
};

}  // namespace ls::views
