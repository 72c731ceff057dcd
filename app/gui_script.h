// --script FILE: UI actions, one per line, run by the GUI loop between frames (the same actions
// keys and menus trigger), for tests and reproducible screenshots.
//   open PATH | reference PATH | demo | demo quant | fault NAME
//                                                   (fault and against: on a server's session, run there)
//                                                   (on a server's session a reference here is uploaded;
//                                                   "server:PATH" or a path not here is the server's)
//   against BACKEND                                 backend A/B: that backend's run is the reference
//   against-model PATH                              the open model against another format of it
//                                                   (a server's session: PATH on the server, run there)
//   key F10 | key F11 | key Shift+F11 | key F5        step op / layer / token, continue
//   panel NAME on|off | panels all                  show a panel (its pane's shown tab) or close it
//   layout NAME                                     a named layout (default, divergence hunt, ...)
//   history element D T C | history head D T H | history kv L P
//                                                   the tensor history of an element, a head, a KV cell
//   zoom NAME | zoom off                            one panel alone over the whole window
//   select DUMP_NAME                                move the cursor
//   weight TENSOR                                   the model's tensor in the weight inspector (a server's
//                                                   session: its bytes fetched from the server)
//   prompt TEXT                                     the session's prompt (the rest of the line)
//   export here|server PATH                         every evaluated event, as the export panel writes it
//                                                   (.gguf: a GGUF dump, else a .npy folder; server: on its disk)
//   wait                                            until the session stops running (and the doctor, an
//                                                   upload or an export)
//   frames N                                        render N frames
//   screenshot PATH                                 save the window as PNG
//   log TEXT | quit
#pragma once

#include <string>
#include <vector>

#include "engine/util/result.h"

namespace ls::app {

class MainView;

class GuiScript {
public:
    static Result<GuiScript> load(const std::string& path);

    bool done() const { return next_ >= lines_.size(); }
    // Runs actions until one needs frames to pass (wait, frames, screenshot). Returns a PNG path
    // when the loop must save a screenshot after this frame. Errors stop the script.
    Result<std::string> step(MainView& view);

private:
    std::vector<std::pair<int, std::string>> lines_;  // (line number, text)
    size_t next_ = 0;
    int frames_left_ = 0;
    int quiet_frames_ = 0;
    uint64_t last_version_ = 0;
    bool waiting_ = false;
    std::string path_;
};

}  // namespace ls::app
