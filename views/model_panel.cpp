// Model panel: overview (with what the config implies: kq scale, YaRN, MLA, MoE), metadata and
// tensor tables (clipped, frozen header row, tooltips).
#include "views/model_panel.h"

#include <fmt/format.h>

#include <vector>

#include "views/debug_context.h"

namespace ls::views {

namespace {

std::string ne_text(const GgufTensorInfo& t) {
    std::string out = "[";
    for (uint32_t d = 0; d < std::max<uint32_t>(t.n_dims, 1); ++d) out += (d ? ", " : "") + std::to_string(t.ne[d]);
    return out + "]";
}

std::string human_bytes(uint64_t n) {
    if (n >= (1ull << 20)) return fmt::format("{:.2f} MiB", double(n) / double(1ull << 20));
    if (n >= (1ull << 10)) return fmt::format("{:.1f} KiB", double(n) / double(1ull << 10));
    return fmt::format("{} B", n);
}

void text(const std::string& s) { ImGui::TextUnformatted(s.c_str(), s.c_str() + s.size()); }

void row(const char* label, const std::string& value) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextDisabled("%s", label);
    ImGui::TableNextColumn();
    text(value);
}

// The derived section's title names what the model has.
std::string derived_title(const ModelConfig& c) {
    std::string title = "Attention scale";
    if (c.arch == Arch::kDeepseek2) title += ", MLA";
    if (c.rope_scaling == RopeScaling::kYarn) title += ", YaRN";
    if (c.n_expert > 0) title += ", MoE";
    return title + " (as llama.cpp derives them)";
}

constexpr ImGuiTableFlags kTableFlags = ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders | ImGuiTableFlags_Resizable |
                                        ImGuiTableFlags_ScrollY | ImGuiTableFlags_SizingFixedFit;

}  // namespace

bool ModelPanel::draw(const ModelDocument* doc) {
    if (!open) return false;
    bool changed = false;
    if (!begin_panel("Model", &open)) {
        ImGui::End();
        return false;
    }
    if (!doc) {
        ImGui::TextDisabled("No model open.");
        ImGui::TextWrapped("File > Open model (Ctrl+O), or start with: layerscope MODEL.gguf");
        ImGui::End();
        return false;
    }
    if (ImGui::BeginTabBar("model_tabs")) {
        if (ImGui::BeginTabItem("Overview")) {
            draw_overview(*doc);
            ImGui::EndTabItem();
        }
        if (ImGui::BeginTabItem("Metadata")) {
            draw_metadata(*doc);
            ImGui::EndTabItem();
        }
        if (ImGui::BeginTabItem("Tensors")) {
            changed = draw_tensors(*doc);
            ImGui::EndTabItem();
        }
        ImGui::EndTabBar();
    }
    ImGui::End();
    return changed;
}

void ModelPanel::draw_overview(const ModelDocument& doc) {
    const GgufFile& f = *doc.file;
    if (ImGui::BeginTable("overview", 2, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit)) {
        row("file", f.path());
        row("format", fmt::format("GGUF v{}, alignment {}, {} keys, {} tensors, {}", f.version(), f.alignment(),
                                  f.metadata().size(), f.tensors().size(), human_bytes(f.file_size())));
        if (doc.config) {
            const ModelConfig& c = *doc.config;
            row("architecture", c.arch_name);
            row("shape", fmt::format("n_embd {}, n_layer {}, n_head {} (kv {}), head_dim {}, n_ff {}", c.n_embd,
                                     c.n_layer, c.n_head, c.n_head_kv, c.head_dim_k, c.n_ff));
            row("rope", fmt::format("{} n_rot {} base {} scaling {}", rope_type_name(c.rope_type), c.n_rot,
                                    c.rope_freq_base, rope_scaling_name(c.rope_scaling)));
            if (c.n_expert > 0)
                row("experts", fmt::format("{} routed, {} used, {} shared, n_ff {}", c.n_expert, c.n_expert_used,
                                           c.n_expert_shared, c.n_ff_expert));
            if (c.arch == Arch::kDeepseek2)
                row("MLA", fmt::format("{}, kv_lora_rank {}, q_lora_rank {}", c.mla_split ? "split k_b/v_b" : "legacy kv_b",
                                       c.kv_lora_rank, c.q_lora_rank));
        } else {
            row("config", doc.config_error);
        }
        const TokenizerSummary& t = doc.tokenizer;
        row("tokenizer", fmt::format("{} / {}, {} tokens, {} merges", t.model.empty() ? "-" : t.model,
                                     t.pre.empty() ? "-" : t.pre, t.n_tokens, t.n_merges));
        row("special", fmt::format("bos {} \"{}\", eos {} \"{}\"", t.bos_id, t.bos_piece, t.eos_id, t.eos_piece));
        row("chat template", t.has_chat_template ? fmt::format("yes ({} bytes)", t.chat_template_bytes) : "no");
        ImGui::EndTable();
    }
    if (doc.config && !doc.derived.empty()) {
        // What the config implies, as llama.cpp derives it: where "plausible but wrong text" starts.
        ImGui::Spacing();
        text(derived_title(*doc.config));
        if (ImGui::BeginTable("derived", 2, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit)) {
            for (const SummaryLine& line : doc.derived) row(line.label.c_str(), line.value);
            ImGui::EndTable();
        }
    }
    ImGui::Spacing();
    ImGui::TextUnformatted("Bytes by tensor type");
    if (ImGui::BeginTable("types", 5, ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit)) {
        ImGui::TableSetupColumn("type");
        ImGui::TableSetupColumn("tensors");
        ImGui::TableSetupColumn("elements");
        ImGui::TableSetupColumn("bytes");
        ImGui::TableSetupColumn("bits/weight");
        ImGui::TableHeadersRow();
        for (const TypeTotal& total : doc.type_totals) {
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(ggml_type_name(total.type));
            ImGui::TableNextColumn();
            ImGui::Text("%lld", static_cast<long long>(total.n_tensors));
            ImGui::TableNextColumn();
            ImGui::Text("%lld", static_cast<long long>(total.n_elements));
            ImGui::TableNextColumn();
            text(human_bytes(total.n_bytes));
            ImGui::TableNextColumn();
            ImGui::Text("%.3f", total.bits_per_weight());
        }
        ImGui::EndTable();
    }
}

void ModelPanel::draw_metadata(const ModelDocument& doc) {
    metadata_filter.Draw("filter##metadata", 240.0f);
    const auto& kvs = doc.file->metadata();
    std::vector<int> shown;
    for (size_t i = 0; i < kvs.size(); ++i)
        if (metadata_filter.PassFilter(kvs[i].key.c_str())) shown.push_back(static_cast<int>(i));
    if (!ImGui::BeginTable("metadata", 3, kTableFlags)) return;
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("key");
    ImGui::TableSetupColumn("type");
    ImGui::TableSetupColumn("value", ImGuiTableColumnFlags_WidthStretch);
    ImGui::TableHeadersRow();
    ImGuiListClipper clipper;
    clipper.Begin(static_cast<int>(shown.size()));
    while (clipper.Step()) {
        for (int r = clipper.DisplayStart; r < clipper.DisplayEnd; ++r) {
            const GgufKV& kv = kvs[static_cast<size_t>(shown[static_cast<size_t>(r)])];
            ImGui::PushID(kv.key.c_str());
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            text(kv.key);
            ImGui::TableNextColumn();
            if (kv.value.is_array()) ImGui::Text("arr[%s]", gguf_value_type_name(kv.value.elem_type));
            else ImGui::TextUnformatted(gguf_value_type_name(kv.value.type));
            ImGui::TableNextColumn();
            text(kv.value.to_string(8));
            if (ImGui::IsItemHovered()) {
                ImGui::BeginTooltip();
                ImGui::PushTextWrapPos(ImGui::GetFontSize() * 40.0f);
                text(kv.value.is_array() ? fmt::format("{} items: {}", kv.value.array_size(), kv.value.to_string(32))
                                         : kv.value.to_string(4096));
                ImGui::PopTextWrapPos();
                ImGui::EndTooltip();
            }
            ImGui::PopID();
        }
    }
    ImGui::EndTable();
}

bool ModelPanel::draw_tensors(const ModelDocument& doc) {
    bool changed = false;
    tensor_filter.Draw("filter##tensors", 240.0f);
    ImGui::SameLine();
    ImGui::TextDisabled("(e.g. \"blk.0.,output\"; click a row to inspect)");
    const auto& tensors = doc.file->tensors();
    std::vector<int> shown;
    for (size_t i = 0; i < tensors.size(); ++i)
        if (tensor_filter.PassFilter(tensors[i].name.c_str())) shown.push_back(static_cast<int>(i));
    if (!ImGui::BeginTable("tensors", 5, kTableFlags)) return false;
    ImGui::TableSetupScrollFreeze(1, 1);
    ImGui::TableSetupColumn("name");
    ImGui::TableSetupColumn("type");
    ImGui::TableSetupColumn("ne");
    ImGui::TableSetupColumn("bytes");
    ImGui::TableSetupColumn("offset");
    ImGui::TableHeadersRow();
    ImGuiListClipper clipper;
    clipper.Begin(static_cast<int>(shown.size()));
    while (clipper.Step()) {
        for (int r = clipper.DisplayStart; r < clipper.DisplayEnd; ++r) {
            const GgufTensorInfo& t = tensors[static_cast<size_t>(shown[static_cast<size_t>(r)])];
            ImGui::PushID(t.name.c_str());
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            bool selected = t.name == selected_tensor;
            if (ImGui::Selectable(t.name.c_str(), selected, ImGuiSelectableFlags_SpanAllColumns)) {
                selected_tensor = t.name;
                changed = true;
            }
            if (ImGui::IsItemHovered()) {
                const GgmlTypeTraits* traits = ggml_type_traits(t.type);
                ImGui::SetTooltip("%s\n%s, ne %s, %lld elements\n%s at data offset %llu\n%.3f bits/weight%s",
                                  t.name.c_str(), ggml_type_name(t.type), ne_text(t).c_str(),
                                  static_cast<long long>(t.n_elements()), human_bytes(t.n_bytes).c_str(),
                                  static_cast<unsigned long long>(t.offset),
                                  t.n_elements() ? 8.0 * double(t.n_bytes) / double(t.n_elements()) : 0.0,
                                  traits && traits->block_elems > 1
                                      ? fmt::format("\nblocks of {} elements, {} bytes", traits->block_elems,
                                                    traits->block_bytes).c_str()
                                      : "");
            }
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(ggml_type_name(t.type));
            ImGui::TableNextColumn();
            text(ne_text(t));
            ImGui::TableNextColumn();
            ImGui::Text("%llu", static_cast<unsigned long long>(t.n_bytes));
            ImGui::TableNextColumn();
            ImGui::Text("%llu", static_cast<unsigned long long>(t.offset));
            ImGui::PopID();
        }
    }
    ImGui::EndTable();
    return changed;
}

}  // namespace ls::views
