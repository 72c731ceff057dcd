// Reading back the window's back buffer and saving it as PNG: the GUI's F12 and --screenshot, and
// the GUI tests, which also check pixels.
#pragma once

#include <string>
#include <vector>

#include "engine/util/result.h"

namespace ls::views {

struct Pixels {
    int width = 0, height = 0;
    std::vector<unsigned char> rgba;  // rows bottom-up, as OpenGL returns them
};

// The current framebuffer (width x height) of the bound context, read before the swap.
Pixels read_back_buffer(int width, int height);
// Writes `pixels` as a PNG (rows flipped to top-down) through engine/util/safe_write.h: an
// existing file is replaced only with `overwrite`, and only a regular file.
Status save_png(const Pixels& pixels, const std::string& path, bool overwrite = false);

}  // namespace ls::views
