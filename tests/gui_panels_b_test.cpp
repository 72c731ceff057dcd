// The debugger's data panels (layer histograms, attention, Q/K magnitudes, logits) on a real
// session over stories260K and its llama.cpp reference, drawn under xvfb-run; saves a screenshot.
// Then the model panel's derived section on deepseek2-mini (MLA, YaRN, MoE) and on stories260K.
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <unistd.h>

#include "views/attention_panel.h"
#include "views/debug_context.h"
#include "tests/gui_test_window.h"
#include "views/screenshot.h"
#include "views/layer_histograms.h"
#include "views/logits_panel.h"
#include "views/model_panel.h"
#include "views/prompt_panel.h"
#include "views/qk_panel.h"
#include "views/tensor_panel.h"
#include "engine/model/make_model.h"
#include "engine/session/session.h"
#include "engine/tokenizer/tokenizer.h"

namespace v = ls::views;

namespace {

bool save_screenshot(GLFWwindow* window, const std::string& path) {
    int width = 0, height = 0;
    glfwGetFramebufferSize(window, &width, &height);
    // The screenshot left to look at replaces the one of the last run.
    return ls::views::save_png(ls::views::read_back_buffer(width, height), path, true).ok();
}

int failures = 0;

void check(bool ok, const std::string& what) {
    std::printf("%s  %s\n", ok ? "PASS" : "FAIL", what.c_str());
    if (!ok) ++failures;
}


std::string fmt_g(float v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", v);
    return buf;
}

using ls::test::draw_gui_frames;
void place(float x, float y, float w, float h) { ls::test::place_next_window(x, y, w, h); }

int64_t find_event(const ls::SessionSnapshot& s, const std::string& name) {
    for (const ls::EventInfo& e : *s.events)
        if (e.name == name) return e.index;
    return -1;
}

}  // namespace

int main(int argc, char** argv) {
    const std::string fixtures = argc > 1 ? argv[1] : "../shared/fixtures";
    const std::string png = argc > 2 ? argv[2] : "gui_panels_b.png";
    const std::string model_path = fixtures + "/models/stories260K.gguf";
    const std::string dump_path = fixtures + "/dumps/stories260K_once_n0_fa-off.gguf";
    if (!std::filesystem::exists(model_path) || !std::filesystem::exists(dump_path)) {
        std::printf("SKIP  fixtures missing under %s\n", fixtures.c_str());
        return 77;
    }

    // The session: prompt, reference, every tensor captured, run to the end of the plan.
    auto opened = ls::Session::open(model_path);
    if (!opened) {
        std::printf("FAIL  cannot open %s: %s\n", model_path.c_str(), opened.error().message.c_str());
        return 1;
    }
    std::unique_ptr<ls::Session> session = std::move(opened.value());
    auto ref_opened = ls::ReferenceDump::open(dump_path);
    if (!ref_opened) {
        std::printf("FAIL  cannot open %s: %s\n", dump_path.c_str(), ref_opened.error().message.c_str());
        return 1;
    }
    std::shared_ptr<const ls::ReferenceDump> reference = std::move(ref_opened.value());
    session->set_tokens({1, 403, 407, 261, 378});
    session->set_reference(reference);
    session->set_capture_policy(ls::CapturePolicy::all());
    auto snap = session->wait_for_ticket(session->run_to_breakpoint(), std::chrono::seconds(60));
    check(snap && !snap->error, "session ran to the end of the plan");
    if (!snap || snap->error) return 1;

    if (!glfwInit()) {
        std::puts("SKIP  no display (run under xvfb-run)");
        return 77;
    }
    GLFWwindow* window = ls::test::open_gui_test_window(1600, 1000, "panels", 14.0f);
    if (!window) return 1;

    {
        v::DebugContext ctx;
        ctx.snap = snap;
        ctx.session = session.get();
        ctx.model = &session->model();
        ctx.reference = reference.get();
        // The cursor on layer 2's residual output: that row highlighted, Q/K of layer 2.
        const int64_t l_out_2 = find_event(*snap, "l_out-2");
        check(l_out_2 >= 0, "the plan has l_out-2");
        ctx.cursor = l_out_2;

        v::LayerHistograms histograms;
        v::AttentionPanel attention;
        v::QKPanel qk;
        v::LogitsPanel logits;
        attention.thumbnail_px = 36;

        auto frames = [&](int n, bool screenshot) {
            draw_gui_frames(
                window, n,
                [&] {  // four quadrants, like the app's own layout
                    place(0, 0, 800, 500);
                    histograms.draw(ctx);
                    place(800, 0, 800, 560);
                    attention.draw(ctx);
                    place(0, 500, 800, 500);
                    qk.draw(ctx);
                    place(800, 560, 800, 440);
                    logits.draw(ctx);
                },
                [&](int frame) {
                    if (screenshot && frame == n) check(save_screenshot(window, png), "screenshot saved to " + png);
                });
        };

        // Empty state first: no snapshot data must not crash and must show nothing.
        {
            v::DebugContext empty;
            empty.snap = std::make_shared<const ls::SessionSnapshot>();
            std::swap(ctx, empty);
            frames(2, false);
            check(histograms.shown.layers == 0 && attention.shown.layers == 0 && logits.shown.entries == 0,
                  "empty snapshot: the panels show their empty states");
            std::swap(ctx, empty);
        }

        frames(3, false);
        // Layer histograms: five l_out rows, each with ours and the reference's.
        check(histograms.shown.layers == 5, "histograms: 5 layer rows (" + std::to_string(histograms.shown.layers) + ")");
        check(histograms.shown.layers_evaluated == 5, "histograms: every layer evaluated");
        check(histograms.shown.layers_with_reference == 5,
              "histograms: every layer has the reference's stats (" +
                  std::to_string(histograms.shown.layers_with_reference) + ")");
        check(histograms.shown.selected_layer == 2, "histograms: the cursor's layer 2 is selected");
        // Attention: 5 layers x 8 heads of 5 x 5 maps.
        check(attention.shown.layers == 5 && attention.shown.heads == 8,
              "attention: grid of " + std::to_string(attention.shown.layers) + " layers x " +
                  std::to_string(attention.shown.heads) + " heads");
        check(attention.shown.thumbnails == 40, "attention: 40 thumbnails with data");
        check(attention.shown.n_query == 5 && attention.shown.n_key == 5, "attention: maps are 5 queries x 5 keys");
        attention.view = v::AttentionPanel::View::Difference;
        frames(2, false);
        check(attention.shown.thumbnails == 40, "attention: the difference view has 40 thumbnails");
        check(attention.shown.difference_range >= 0 && attention.shown.difference_range < 0.05f,
              "attention: ours and the reference's agree (max |diff| " +
                  fmt_g(attention.shown.difference_range) + ")");
        attention.view = v::AttentionPanel::View::Ours;
        // Many heads: three per page, the most peaked first. Layer 0's ranking against the normalized
        // row entropy of its heads computed here from the captured probabilities.
        attention.heads_per_page = 3;
        attention.order = v::AttentionPanel::Order::kEntropy;
        frames(2, false);
        check(attention.shown.columns == 3 && attention.shown.pages == 3, "attention: 3 heads per page, 3 pages");
        check(attention.shown.thumbnails == 15, "attention: 15 thumbnails on the first page");
        {
            const int64_t sm = find_event(*snap, "kq_soft_max-0");
            auto cap = sm >= 0 ? snap->capture(sm) : nullptr;
            std::vector<std::pair<double, int>> by_entropy;
            if (cap) {
                const int64_t n_kv = cap->info.ne[0], n_q = cap->info.ne[1], heads = cap->info.ne[2];
                for (int h = 0; h < heads; ++h) {
                    double sum = 0;
                    int rows = 0;
                    for (int64_t q = 0; q < n_q; ++q) {
                        double e = 0;
                        int valid = 0;
                        for (int64_t k = 0; k < n_kv; ++k) {
                            const double p = (*cap->values)[static_cast<size_t>((h * n_q + q) * n_kv + k)];
                            if (p > 0) e -= p * std::log(p), ++valid;
                        }
                        if (valid > 1) sum += e / std::log(static_cast<double>(valid)), ++rows;
                    }
                    by_entropy.push_back({rows ? sum / rows : 1.0, h});
                }
                std::stable_sort(by_entropy.begin(), by_entropy.end(),
                                 [](const auto& a, const auto& b) { return a.first < b.first; });
            }
            const std::vector<int> want = by_entropy.size() >= 3
                                              ? std::vector<int>{by_entropy[0].second, by_entropy[1].second, by_entropy[2].second}
                                              : std::vector<int>{};
            check(!attention.shown.head_order.empty() && attention.shown.head_order[0] == want,
                  "attention: layer 0's most peaked heads first");
        }
        attention.page = 2;
        frames(2, false);
        check(attention.shown.thumbnails == 10, "attention: the last page holds the last 2 heads of each layer");
        attention.heads_per_page = 8;
        attention.page = 0;
        attention.order = v::AttentionPanel::Order::kIndex;
        frames(1, false);

        // Q/K: layer 2, 5 positions, the reference beside, the summary over 5 layers.
        check(qk.shown.layer == 2, "qk: the cursor's layer");
        check(qk.shown.q_heads == 8 && qk.shown.k_heads > 0,
              "qk: " + std::to_string(qk.shown.q_heads) + " Q heads, " + std::to_string(qk.shown.k_heads) + " K heads");
        check(qk.shown.positions == 5, "qk: 5 positions");
        check(qk.shown.reference, "qk: the reference's norms beside");
        check(qk.shown.summary_layers == 5, "qk: summary over 5 layers");
        check(std::isfinite(qk.shown.q_threshold) && qk.shown.q_threshold > 0, "qk: a threshold from the median");

        // Logits: the first entry is the argmax of our captured result_output's last row.
        const int64_t result = find_event(*snap, "result_output");
        auto cap = result >= 0 ? snap->capture(result) : nullptr;
        int32_t argmax = -1;
        if (cap) {
            const int64_t n_vocab = cap->info.ne[0];
            const float* row = cap->values->data() + cap->values->size() - n_vocab;
            argmax = static_cast<int32_t>(std::max_element(row, row + n_vocab) - row);
        }
        check(logits.shown.entries > 0, "logits: " + std::to_string(logits.shown.entries) + " entries");
        check(argmax >= 0 && logits.shown.first_token == argmax,
              "logits: first entry " + std::to_string(logits.shown.first_token) + " is the argmax " + std::to_string(argmax));
        check(!logits.shown.padded_vocab_hint, "logits: no padded-vocabulary hint for stories260K");
        logits.look_up(std::to_string(argmax));
        frames(1, false);
        check(logits.lookup().token == argmax && logits.lookup().ours.valid && logits.lookup().ours.rank == 0,
              "logits: looking up the argmax id gives rank 0");
        check(logits.lookup().reference.valid, "logits: the lookup ranks the token in the reference too");
        const ls::Tokenizer* tokenizer = ctx.model->tokenizer();
        if (tokenizer && tokenizer->valid(argmax)) {
            std::string text = tokenizer->token_to_piece(argmax);
            logits.look_up(text);
            frames(1, false);
            check(logits.lookup().token == argmax && logits.lookup().ours.rank == 0,
                  "logits: looking up '" + text + "' by text resolves to token " + std::to_string(logits.lookup().token));
        }

        // The screenshot: layer 2 enlarged at head 3, a text lookup shown.
        attention.select_cell(2, 3);
        frames(4, true);
        check(attention.shown.enlarged, "attention: layer 2 head 3 enlarged");
        check(ctx.requested_cursor == -2, "no panel moved the cursor by itself");

        // The prompt panel beside another engine's ids: where they part, or that they agree.
        v::PromptPanel prompt;
        auto prompt_frames = [&](int n) {
            draw_gui_frames(window, n, [&] {
                place(0, 0, 800, 600);
                prompt.draw(ctx);
            });
        };
        prompt_frames(2);
        check(!prompt.shown.compared, "prompt: nothing compared without their ids");
        prompt.their_ids = "[1, 403, 407, 261, 378]";
        prompt_frames(2);
        check(prompt.shown.compared && prompt.shown.same, "prompt: the same ids agree");
        prompt.their_ids = "1 403 999 261 378";
        prompt_frames(2);
        check(prompt.shown.compared && !prompt.shown.same && prompt.shown.first_difference == 2,
              "prompt: first difference at token 2 (" + std::to_string(prompt.shown.first_difference) + ")");
        prompt.their_ids = "1, 403";
        prompt_frames(2);
        check(prompt.shown.first_difference == 2, "prompt: a shorter list parts where it ends");
        prompt.their_ids = "1, x";
        prompt_frames(2);
        check(!prompt.shown.compared && prompt.shown.compare_error.find("not a list of token ids") != std::string::npos,
              "prompt: a list that does not parse says so");
        check(glGetError() == GL_NO_ERROR, "no OpenGL error");
    }  // the heatmaps free their textures while the context is alive

    // The model panel's overview: what the config implies, as ImGui logs the text it draws (to the
    // clipboard, the one log target read back through the public API).
    auto model_panel_text = [&](const std::string& path) {
        auto doc = v::ModelDocument::load(path);
        if (!doc) return std::string("(cannot open ") + path + ")";
        v::ModelPanel panel;
        std::string text;
        draw_gui_frames(window, 3, [&] {  // the tab bar shows its first tab from frame 2
            place(0, 0, 1600, 1000);
            ImGui::LogToClipboard();
            panel.draw(doc->get());
            ImGui::LogFinish();
            const char* clipboard = ImGui::GetClipboardText();
            text = clipboard ? clipboard : "";
        });
        return text;
    };
    // README section 5 item 10: llama.cpp's numbers for deepseek2-mini's YaRN and kq scale.
    const std::string ds = model_panel_text(fixtures + "/models/deepseek2-mini-F16.gguf");
    for (const char* s : {"Attention scale, MLA, YaRN, MoE", "kq scale 0.229443", "mscale 1.260804", "attn_factor 0.730520",
                          "corr dims [2, 6]", "absorbed q/k 80", "top 2 of 8 experts"})
        check(ds.find(s) != std::string::npos, std::string("model panel, deepseek2-mini: shows \"") + s + "\"");
    const std::string stories = model_panel_text(model_path);
    check(stories.find("kq scale 0.353553") != std::string::npos && stories.find("YaRN") == std::string::npos &&
              stories.find("corr dims") == std::string::npos,
          "model panel, stories260K: a kq scale and no YaRN section");

    // A sliding-window model (gemma3-tiny: layers 0 and 1 local with a window of 8, layer 2 global):
    // the attention grid marks the local layers, the enlarged map and the Q/K panel say which
    // positions the layer sees, and the model panel lists the layers.
    {
        const std::string dir = std::filesystem::temp_directory_path() / ("ls_gui_gemma_" + std::to_string(::getpid()));
        std::filesystem::create_directories(dir);
        const std::string gemma = dir + "/gemma3-tiny.gguf";
        auto spec = ls::make_model_preset("gemma3-tiny");
        check(spec.ok() && ls::make_model(spec.value(), gemma).ok(), "gemma3-tiny written");
        auto gs = ls::Session::open(gemma);
        check(gs.ok(), "gemma3-tiny opens in a session");
        if (gs.ok()) {
            std::unique_ptr<ls::Session> s = std::move(gs.value());
            std::vector<int32_t> tokens;
            for (int i = 0; i < 20; ++i) tokens.push_back(300 + i);
            s->set_tokens(tokens);
            s->set_capture_policy(ls::CapturePolicy::all());
            auto gsnap = s->wait_for_ticket(s->run_to_breakpoint(), std::chrono::seconds(60));
            check(gsnap && !gsnap->error, "gemma3-tiny ran to the end of the plan");
            if (gsnap && !gsnap->error) {
                v::DebugContext ctx;
                ctx.snap = gsnap;
                ctx.session = s.get();
                ctx.model = &s->model();
                ctx.cursor = find_event(*gsnap, "l_out-0");
                v::AttentionPanel attention;
                v::QKPanel qk;
                attention.select_cell(0, 1);
                draw_gui_frames(window, 3, [&] {
                    place(0, 0, 800, 1000);
                    attention.draw(ctx);
                    place(800, 0, 800, 1000);
                    qk.draw(ctx);
                });
                check(attention.shown.layers == 3 && attention.shown.local_layers == 2,
                      "gemma attention: 2 of " + std::to_string(attention.shown.layers) + " layers marked local");
                check(attention.shown.window_note == "local layer (window 8): position 19 sees positions 12..19",
                      "gemma attention: the enlarged layer's window (\"" + attention.shown.window_note + "\")");
                check(qk.shown.window_note == "local layer (window 8): position 19 sees positions 12..19",
                      "gemma qk: the layer's window (\"" + qk.shown.window_note + "\")");
                check(attention.shown.sink_share < 0, "gemma attention: no sink share (the model has no sinks)");
            }
        }
        const std::string text = model_panel_text(gemma);
        check(text.find("2 of 3 layers local") != std::string::npos && text.find("global layers: 2") != std::string::npos,
              "model panel, gemma3-tiny: the local and global layers");
        std::filesystem::remove_all(dir);
    }

    // gpt-oss (gpt-oss-tiny: sinks of spread 1 in both layers): the enlarged head says how much of
    // each row its sink takes (what the keys leave of 1: zero if the sinks were left out).
    {
        const std::string dir = std::filesystem::temp_directory_path() / ("ls_gui_gptoss_" + std::to_string(::getpid()));
        std::filesystem::create_directories(dir);
        const std::string path = dir + "/gpt-oss-tiny.gguf";
        auto spec = ls::make_model_preset("gpt-oss-tiny");
        check(spec.ok() && ls::make_model(spec.value(), path).ok(), "gpt-oss-tiny written");
        auto gs = ls::Session::open(path);
        check(gs.ok(), "gpt-oss-tiny opens in a session");
        if (gs.ok()) {
            std::unique_ptr<ls::Session> s = std::move(gs.value());
            std::vector<int32_t> tokens;
            for (int i = 0; i < 12; ++i) tokens.push_back(300 + i);
            s->set_tokens(tokens);
            s->set_capture_policy(ls::CapturePolicy::all());
            auto snap = s->wait_for_ticket(s->run_to_breakpoint(), std::chrono::seconds(60));
            check(snap && !snap->error, "gpt-oss-tiny ran to the end of the plan");
            if (snap && !snap->error) {
                v::DebugContext ctx;
                ctx.snap = snap;
                ctx.session = s.get();
                ctx.model = &s->model();
                ctx.cursor = find_event(*snap, "l_out-1");
                v::AttentionPanel attention;
                attention.select_cell(1, 2);
                draw_gui_frames(window, 3, [&] {
                    place(0, 0, 800, 1000);
                    attention.draw(ctx);
                });
                check(attention.shown.enlarged && attention.shown.sink_share > 0.001f && attention.shown.sink_share < 1.0f &&
                          attention.shown.sink_share_max >= attention.shown.sink_share,
                      "gpt-oss attention: the sink's share shown (mean " + fmt_g(attention.shown.sink_share) + ", max " +
                          fmt_g(attention.shown.sink_share_max) + ")");
            }
        }
        std::filesystem::remove_all(dir);
    }

    // The quant block inspector in the weight panel: an MXFP4 expert block's exponent and its 32
    // elements; an f32 tensor has none; another model's document drops the selection.
    {
        const std::string dir = std::filesystem::temp_directory_path() / ("ls_gui_blocks_" + std::to_string(::getpid()));
        std::filesystem::create_directories(dir);
        const std::string path = dir + "/gpt-oss-tiny-mxfp4.gguf";
        auto spec = ls::make_model_preset("gpt-oss-tiny");
        check(spec.ok(), "gpt-oss-tiny preset");
        if (spec.ok()) {
            spec.value().type = ls::GgmlType::MXFP4;
            check(ls::make_model(spec.value(), path).ok(), "gpt-oss-tiny MXFP4 written");
        }
        auto doc = v::ModelDocument::load(path);
        auto other = v::ModelDocument::load(path);
        check(doc.ok() && other.ok(), "its model document loads");
        if (doc.ok() && other.ok()) {
            v::TensorPanel weights;
            weights.select(doc.value(), "blk.0.ffn_up_exps.weight");
            check(weights.select_block(3), "block 3 selected");
            draw_gui_frames(window, 2, [&] {
                place(0, 0, 800, 1000);
                weights.draw(doc.value());
            });
            check(weights.shown.block == 3 && weights.shown.elements == 32 &&
                      weights.shown.fields.find("e ") == 0 && weights.shown.fields.find("(E8M0)") != std::string::npos,
                  "weights: MXFP4 block 3, its exponent and 32 elements (" + weights.shown.fields + ")");
            weights.select(doc.value(), "blk.0.attn_sinks.weight");
            draw_gui_frames(window, 1, [&] {
                place(0, 0, 800, 1000);
                weights.draw(doc.value());
            });
            check(weights.shown.block < 0 && weights.shown.elements == 0, "weights: an f32 tensor shows no block");
            weights.select(doc.value(), "blk.0.ffn_up_exps.weight");
            draw_gui_frames(window, 1, [&] {
                place(0, 0, 800, 1000);
                weights.draw(other.value());
            });
            check(weights.shown.block < 0, "weights: another model's document drops the selection");
            // A document closed, then another loaded (often where the first one lay): the selection
            // was the closed one's, so it goes.
            auto load_shared = [&] {
                auto r = v::ModelDocument::load(path);
                return r.ok() ? r.value() : std::shared_ptr<const v::ModelDocument>();
            };
            std::shared_ptr<const v::ModelDocument> closed = load_shared();
            check(closed != nullptr, "a third document loads");
            weights.select(closed, "blk.0.ffn_up_exps.weight");
            closed.reset();
            const std::shared_ptr<const v::ModelDocument> next = load_shared();
            draw_gui_frames(window, 1, [&] {
                place(0, 0, 800, 1000);
                weights.draw(next);
            });
            check(weights.shown.block < 0, "weights: a closed document's selection goes, wherever the next one lies");
        }
        std::filesystem::remove_all(dir);
    }

    ls::test::close_gui_test_window(window);
    std::printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
