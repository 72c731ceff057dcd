// "Open model" dialog of our own (ImGui 1.86 has none): a path box plus a browsable listing of
// folders and .gguf files.
#pragma once

#include <string>
#include <vector>

namespace ls::views {

struct OpenDialog {
    // Opens the dialog next frame, starting in `folder` (the current model's folder or the cwd).
    void show(const std::string& folder);
    // Returns true the frame the user confirmed a path; the path is then in `chosen`.
    bool draw();

    std::string chosen;

private:
    void list(const std::string& folder);

    bool want_open_ = false;
    char path_[1024] = {};
    std::string folder_;
    std::vector<std::string> dirs_;
    std::vector<std::string> files_;
};

}  // namespace ls::views
