// Event naming in the dump format.
#include "forward/event.h"

namespace ls {

std::string event_dump_name(const std::string& name, int occurrence, int decode, int ubatch) {
    std::string out = name;
    if (occurrence >= 2) out += "#" + std::to_string(occurrence);
    if (decode >= 1 || ubatch >= 1) {
        out += "@" + std::to_string(decode);
        if (ubatch >= 1) out += "." + std::to_string(ubatch);
    }
    return out;
}

std::string Event::dump_name() const { return event_dump_name(name, occurrence, decode, ubatch); }

}  // namespace ls
