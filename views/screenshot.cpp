// Framebuffer read-back and PNG writing (stb_image_write, compiled into Debian's libstb, encodes
// into memory; engine/util/safe_write.h writes the file).
#include "views/screenshot.h"

#include <stb/stb_image_write.h>

#include <algorithm>

#include "engine/util/safe_write.h"

#define GL_GLEXT_PROTOTYPES
#include <GL/gl.h>

namespace ls::views {

Pixels read_back_buffer(int width, int height) {
    Pixels p;
    p.width = width, p.height = height;
    p.rgba.resize(static_cast<size_t>(width) * height * 4);
    glPixelStorei(GL_PACK_ALIGNMENT, 1);
    glReadBuffer(GL_BACK);  // before the swap: the back buffer is undefined after it
    glReadPixels(0, 0, width, height, GL_RGBA, GL_UNSIGNED_BYTE, p.rgba.data());
    return p;
}

Status save_png(const Pixels& p, const std::string& path, bool overwrite) {
    const size_t row_bytes = static_cast<size_t>(p.width) * 4;
    std::vector<unsigned char> flipped(p.rgba.size());
    for (int y = 0; y < p.height; ++y)
        std::copy_n(&p.rgba[static_cast<size_t>(p.height - 1 - y) * row_bytes], row_bytes, &flipped[y * row_bytes]);
    std::string png;
    auto append = [](void* context, void* data, int size) {
        static_cast<std::string*>(context)->append(static_cast<const char*>(data), static_cast<size_t>(size));
    };
    if (!stbi_write_png_to_func(append, &png, p.width, p.height, 4, flipped.data(), static_cast<int>(row_bytes)))
        return make_error(ErrorCode::kInternal, path + ": the PNG encoder failed");
    return write_file_safely(path, png, overwrite);
}

}  // namespace ls::views
