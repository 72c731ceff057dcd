// Tensor inspector (see tensor_panel.h): stats line, a histogram of values and a value table.
#include "views/tensor_panel.h"

#include <fmt/format.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>

namespace ls::views {

void TensorPanel::clear() {
    name_.clear();
    description_.clear();
    error_.clear();
    values_.clear();
    stats_ = {};
}

void TensorPanel::select(const ModelDocument* doc, const std::string& name) {
    clear();
    if (!doc) return;
    const GgufTensorInfo* t = doc->file->find_tensor(name);
    if (!t) return;
    name_ = name;
    std::string ne;
    for (uint32_t d = 0; d < std::max<uint32_t>(t->n_dims, 1); ++d) ne += (d ? ", " : "") + std::to_string(t->ne[d]);
    description_ = fmt::format("{}, ne [{}], {} elements", ggml_type_name(t->type), ne, t->n_elements());
    auto values = dequantize_tensor(*t);
    if (!values.ok()) {
        error_ = values.error().message;
        return;
    }
    values_ = std::move(values.value());
    stats_ = compute_stats(values_.data(), static_cast<int64_t>(values_.size()));
}

void TensorPanel::draw() {
    if (!open) return;
    if (!ImGui::Begin("Tensor", &open)) {
        ImGui::End();
        return;
    }
    if (name_.empty()) {
        ImGui::TextDisabled("Select a tensor in Model > Tensors.");
        ImGui::End();
        return;
    }
    ImGui::TextUnformatted(name_.c_str());
    ImGui::TextDisabled("%s", description_.c_str());
    if (!error_.empty()) {
        ImGui::TextColored({1.0f, 0.4f, 0.4f, 1.0f}, "%s", error_.c_str());
        ImGui::End();
        return;
    }
    ImGui::Text("min %.5g  max %.5g  mean %.5g  rms %.5g  nan %lld  inf %lld", stats_.min, stats_.max, stats_.mean,
                stats_.rms, static_cast<long long>(stats_.n_nan), static_cast<long long>(stats_.n_inf));

    // 64-bin histogram over [min, max] of the finite values.
    constexpr int kBins = 64;
    float bins[kBins] = {};
    double span = stats_.max - stats_.min;
    for (float v : values_) {
        if (!std::isfinite(v)) continue;
        int b = span > 0 ? static_cast<int>((v - stats_.min) / span * kBins) : 0;
        bins[std::clamp(b, 0, kBins - 1)] += 1.0f;
    }
    ImGui::PlotHistogram("##histogram", bins, kBins, 0, "value histogram", 0.0f, FLT_MAX,
                         ImVec2(ImGui::GetContentRegionAvail().x, 90.0f));

    if (ImGui::BeginTable("values", 2, ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders | ImGuiTableFlags_ScrollY)) {
        ImGui::TableSetupScrollFreeze(0, 1);
        ImGui::TableSetupColumn("index");
        ImGui::TableSetupColumn("value");
        ImGui::TableHeadersRow();
        ImGuiListClipper clipper;
        clipper.Begin(static_cast<int>(values_.size()));
        while (clipper.Step()) {
            for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
                ImGui::TableNextRow();
                ImGui::TableNextColumn();
                ImGui::Text("%d", i);
                ImGui::TableNextColumn();
                ImGui::Text("%.9g", values_[static_cast<size_t>(i)]);
            }
        }
        ImGui::EndTable();
    }
    ImGui::End();
}

}  // namespace ls::views
