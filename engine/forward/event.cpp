// Event naming in the dump format.
#include "engine/forward/event.h"

namespace ls {

std::string event_dump_name(const std::string& name, int occurrence, int decode, int ubatch) {
    // Appends only: GCC 12 warns (falsely, bug 105329) about "literal" + std::string.
    std::string out = name;
    if (occurrence >= 2) out.append(1, '#').append(std::to_string(occurrence));
    if (decode >= 1 || ubatch >= 1) {
        out.append(1, '@').append(std::to_string(decode));
        if (ubatch >= 1) out.append(1, '.').append(std::to_string(ubatch));
    }
    return out;
}

std::string Event::dump_name() const { return event_dump_name(name, occurrence, decode, ubatch); }

}  // namespace ls
