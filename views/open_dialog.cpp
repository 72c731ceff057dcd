// Open-model dialog (see open_dialog.h).
#include "views/open_dialog.h"

#include <imgui.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

namespace ls::views {

namespace fs = std::filesystem;

void OpenDialog::show(const std::string& folder) {
    want_open_ = true;
    list(folder.empty() ? fs::current_path().string() : folder);
}

void OpenDialog::list(const std::string& folder) {
    folder_ = folder;
    dirs_.clear();
    files_.clear();
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(folder, fs::directory_options::skip_permission_denied, ec)) {
        std::string name = entry.path().filename().string();
        if (name.empty() || name[0] == '.') continue;
        if (entry.is_directory(ec)) dirs_.push_back(name);
        else if (entry.path().extension() == ".gguf") files_.push_back(name);
    }
    std::sort(dirs_.begin(), dirs_.end());
    std::sort(files_.begin(), files_.end());
    std::snprintf(path_, sizeof path_, "%s/", folder_.c_str());
}

bool OpenDialog::draw() {
    if (want_open_) {
        ImGui::OpenPopup("Open model");
        want_open_ = false;
    }
    bool confirmed = false;
    ImGui::SetNextWindowSize(ImVec2(640, 420), ImGuiCond_Appearing);
    if (!ImGui::BeginPopupModal("Open model", nullptr)) return false;
    ImGui::SetNextItemWidth(-1);
    if (ImGui::IsWindowAppearing()) ImGui::SetKeyboardFocusHere();
    bool enter = ImGui::InputText("##path", path_, sizeof path_, ImGuiInputTextFlags_EnterReturnsTrue);
    ImGui::TextDisabled("%s", folder_.c_str());
    ImGui::BeginChild("listing", ImVec2(0, -ImGui::GetFrameHeightWithSpacing()), true);
    std::string go_to;
    if (ImGui::Selectable("../")) go_to = fs::path(folder_).parent_path().string();
    for (const std::string& d : dirs_)
        if (ImGui::Selectable((d + "/").c_str())) go_to = (fs::path(folder_) / d).string();
    for (const std::string& f : files_) {
        std::string full = (fs::path(folder_) / f).string();
        if (ImGui::Selectable(f.c_str(), full == path_, ImGuiSelectableFlags_AllowDoubleClick)) {
            std::snprintf(path_, sizeof path_, "%s", full.c_str());
            if (ImGui::IsMouseDoubleClicked(0)) enter = true;
        }
    }
    ImGui::EndChild();
    if (!go_to.empty()) list(go_to);
    if (ImGui::Button("Open") || enter) {
        chosen = path_;
        confirmed = true;
        ImGui::CloseCurrentPopup();
    }
    ImGui::SameLine();
    if (ImGui::Button("Cancel") || ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape))) ImGui::CloseCurrentPopup();
    ImGui::EndPopup();
    return confirmed;
}

}  // namespace ls::views
