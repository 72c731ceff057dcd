// layerscope entry point: parses the command line (CLI11) and dispatches to a command; with no
// command it opens the GUI, or explains how to get one in a headless build.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>

#include "commands.h"

namespace {

void add_inspect_command(CLI::App& app, ls::app::InspectOptions& options) {
    CLI::App* inspect = app.add_subcommand("inspect", "Show a GGUF file's metadata, tokenizer, tensors and lints");
    inspect->add_option("model", options.model_path, "GGUF model file")->required();
    inspect->add_flag("--json", options.json, "Print one JSON object instead of text");
    inspect->add_flag("--tensors", options.list_tensors, "List every tensor (name, type, ne, bytes, offset)");
    inspect->add_option("--tensor", options.tensor_name, "Dequantize this tensor: print values and statistics");
    inspect->add_option("--values", options.values, "How many values --tensor prints (default 16)")
        ->check(CLI::Range(0, 1 << 30));
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Layerscope: a debugger and visualizer for LLM inference.\n"
                 "Without a command, opens the GUI (optionally on MODEL)."};
    app.set_version_flag("--version", "layerscope 0.1.0");
    app.require_subcommand(0, 1);

    ls::app::GuiOptions gui;
    app.add_option("model", gui.model_path, "GGUF model to open in the GUI");
    app.add_option("--screenshot", gui.screenshot_path,
                   "GUI check: render --frames frames, save the window as PNG to this path and exit");
    app.add_option("--frames", gui.frames, "Frames to render before --screenshot (default 3)")
        ->check(CLI::Range(1, 100000));
    // Backends (--backend cpu|cuda) will be chosen here once the engine runs models; the CUDA
    // module is loaded at run time, so this binary never links the CUDA libraries.

    ls::app::InspectOptions inspect;
    add_inspect_command(app, inspect);

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        int code = app.exit(e);  // prints help/version to stdout, errors to stderr
        if (code == 0) return ls::app::kExitOk;
        return ls::app::kExitUsage;
    }

    if (app.got_subcommand("inspect")) return ls::app::run_inspect(inspect);

    // `layerscope typo` would otherwise open a window that fails to load "typo".
    if (!gui.model_path.empty() && !std::filesystem::exists(gui.model_path)) {
        std::fprintf(stderr, "layerscope: '%s' is neither a command nor a file. Commands: inspect; "
                             "see 'layerscope --help'.\n", gui.model_path.c_str());
        return ls::app::kExitUsage;
    }

#ifdef LAYERSCOPE_HAVE_GUI
    return ls::app::run_gui(gui);
#else
    std::fputs("layerscope: this build has no GUI (GLFW, OpenGL or Dear ImGui were not found when it was "
               "configured).\nInstall libglfw3-dev, libimgui-dev and an OpenGL development package, then "
               "reconfigure with -DLAYERSCOPE_GUI=ON.\nHeadless commands work: layerscope inspect MODEL.gguf\n",
               stderr);
    return ls::app::kExitUsage;
#endif
}
