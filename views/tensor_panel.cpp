// Tensor inspector (see tensor_panel.h): stats line, a histogram of values and a value table.
#include "views/tensor_panel.h"

#include <fmt/format.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "views/debug_context.h"

namespace ls::views {

void TensorPanel::clear() {
    doc_.reset();
    name_.clear();
    description_.clear();
    error_.clear();
    info_ = {};
    bytes_.reset();
    awaiting_ = asked_ = false;
    values_.clear();
    stats_ = {};
    n_blocks_ = block_elements_ = 0;
    block_ = {};
    block_error_.clear();
}

void TensorPanel::select(const std::shared_ptr<const ModelDocument>& doc, const std::string& name) {
    clear();
    if (!doc) return;
    const GgufTensorInfo* t = doc->file->find_tensor(name);
    if (!t) return;
    doc_ = doc;
    name_ = name;
    n_blocks_ = quant_block_count(*t);
    block_elements_ = n_blocks_ > 0 ? t->n_elements() / n_blocks_ : 0;
    std::string ne;
    for (uint32_t d = 0; d < std::max<uint32_t>(t->n_dims, 1); ++d) ne += (d ? ", " : "") + std::to_string(t->ne[d]);
    description_ = fmt::format("{}, ne [{}], {} elements", ggml_type_name(t->type), ne, t->n_elements());
    if (!doc->file->has_data()) {
        awaiting_ = true;  // a model on a server: draw() fetches the bytes
        return;
    }
    decode(*t);
}

void TensorPanel::decode(const GgufTensorInfo& tensor) {
    info_ = tensor;
    auto values = dequantize_tensor(tensor);
    if (!values.ok()) {
        error_ = values.error().message;
        return;
    }
    values_ = std::move(values.value());
    stats_ = compute_stats(values_.data(), static_cast<int64_t>(values_.size()));
    if (n_blocks_ > 0) select_block(0);
}

void TensorPanel::poll_remote(const ModelDocument& doc, RemoteEvents* remote) {
    if (!remote) {
        awaiting_ = false;
        error_ = fmt::format("{}: its data are not here, and no server to fetch them from", name_);
        return;
    }
    if (!asked_) {
        remote->fetch_weight(name_);  // nothing when it is here or on its way already
        asked_ = true;
    }
    bool pending = false;
    std::string error;
    std::shared_ptr<const std::string> bytes = remote->weight(name_, &pending, &error);
    if (pending) return;
    awaiting_ = false;
    const GgufTensorInfo* t = doc.file->find_tensor(name_);
    if (!bytes || !t || bytes->size() != t->n_bytes) {
        error_ = fmt::format("{}: not fetched from the server: {}", name_, error.empty() ? "no answer" : error);
        news_ = "weight " + error_;
        return;
    }
    bytes_ = std::move(bytes);
    GgufTensorInfo here = *t;
    here.data = reinterpret_cast<const uint8_t*>(bytes_->data());
    decode(here);
    news_ = error_.empty() ? fmt::format("weight {}: {} values, {} bytes fetched from the server, rms {:.6g}", name_,
                                         stats_.n, bytes_->size(), stats_.rms)
                           : "weight " + error_;
}

bool TensorPanel::select_block(int64_t block) {
    const std::shared_ptr<const ModelDocument> doc = doc_.lock();
    if (!doc || n_blocks_ <= 0) return false;
    if (!info_.data) return false;  // not decoded (yet)
    auto b = describe_quant_block(info_, doc->file->data_offset(), std::clamp<int64_t>(block, 0, n_blocks_ - 1));
    block_error_ = b ? "" : b.error().message;
    block_ = b ? std::move(b.value()) : QuantBlock{};
    return b.ok();
}

// One block as stored: its fields, how a value is made, and every element's code, level, group and
// value; the block or the block of an element chosen above it.
void TensorPanel::draw_block() {
    ImGui::Separator();
    ImGui::TextUnformatted("Quant block");
    if (n_blocks_ <= 0) {
        ImGui::TextDisabled("%s stores each element as itself: no blocks", description_.c_str());
        return;
    }
    int64_t block = block_.elements.empty() ? 0 : block_.block;
    int64_t element = block * block_elements_;
    const int64_t step = 1;
    ImGui::SetNextItemWidth(160.0f);
    if (ImGui::InputScalar("block", ImGuiDataType_S64, &block, &step)) select_block(block);
    ImGui::SameLine();
    ImGui::TextDisabled("of %lld, %lld elements each", static_cast<long long>(n_blocks_), static_cast<long long>(block_elements_));
    ImGui::SetNextItemWidth(160.0f);
    if (ImGui::InputScalar("block of element", ImGuiDataType_S64, &element, &step, nullptr, "%lld",
                           ImGuiInputTextFlags_EnterReturnsTrue))
        select_block(element / block_elements_);
    if (!block_error_.empty()) {
        ImGui::TextColored({1.0f, 0.4f, 0.4f, 1.0f}, "%s", block_error_.c_str());
        return;
    }
    ImGui::TextDisabled("%llu bytes at file offset %llu", static_cast<unsigned long long>(block_.block_bytes),
                        static_cast<unsigned long long>(block_.file_offset));
    for (const QuantBlockField& f : block_.fields) {
        ImGui::Text("%-6s %s", f.name.c_str(), f.value.c_str());
        shown.fields += f.name + " " + f.value + "\n";
    }
    ImGui::TextDisabled("%s", block_.formula.c_str());
    shown.block = block_.block;
    if (ImGui::BeginTable("block", 5, ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders | ImGuiTableFlags_ScrollY,
                          ImVec2(0.0f, 220.0f))) {
        ImGui::TableSetupScrollFreeze(0, 1);
        for (const char* h : {"element", "code", "level", "group", "value"}) ImGui::TableSetupColumn(h);
        ImGui::TableHeadersRow();
        for (const QuantBlockElement& e : block_.elements) {
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            ImGui::Text("%lld", static_cast<long long>(e.index));
            ImGui::TableNextColumn();
            ImGui::Text("%d", e.code);
            ImGui::TableNextColumn();
            ImGui::Text("%d", e.level);
            ImGui::TableNextColumn();
            ImGui::Text("%d", e.group);
            ImGui::TableNextColumn();
            ImGui::Text("%.9g", e.value);
            ++shown.elements;
        }
        ImGui::EndTable();
    }
}

void TensorPanel::draw(const std::shared_ptr<const ModelDocument>& doc, RemoteEvents* remote) {
    shown = {};
    if (!name_.empty() && doc_.lock() != doc) clear();  // another model is open now
    if (awaiting_ && doc) poll_remote(*doc, remote);
    if (!open) return;
    if (!begin_panel("Tensor", &open)) {
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
    if (awaiting_) {
        const GgufTensorInfo* t = doc ? doc->file->find_tensor(name_) : nullptr;
        ImGui::TextDisabled("fetching its %llu bytes from the server...", static_cast<unsigned long long>(t ? t->n_bytes : 0));
        ImGui::End();
        return;
    }
    if (bytes_) ImGui::TextDisabled("its bytes fetched from the server (the model runs there)");
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
    draw_block();
    ImGui::Separator();

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
