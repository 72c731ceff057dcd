// Event naming in the dump format.
#include "engine/forward/event.h"

#include <utility>

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

namespace {

// 1 to 9 digits: a suffix number that fits in an int.
bool parse_number(const std::string& s, int* out) {
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) return false;
    *out = std::stoi(s);
    return true;
}

}  // namespace

bool parse_dump_name(const std::string& dump_name, DumpName* out) {
    DumpName r;
    r.base = dump_name;
    bool ok = true;
    if (const size_t at = r.base.rfind('@'); at != std::string::npos) {
        const std::string tail = r.base.substr(at + 1);
        const size_t dot = tail.find('.');
        int decode = 0, ubatch = 0;
        if (parse_number(tail.substr(0, dot), &decode) &&
            (dot == std::string::npos || parse_number(tail.substr(dot + 1), &ubatch))) {
            r.decode = decode;
            r.ubatch = ubatch;
            r.base.resize(at);
        } else {
            ok = false;
        }
    }
    if (const size_t hash = r.base.rfind('#'); hash != std::string::npos) {
        if (parse_number(r.base.substr(hash + 1), &r.occurrence)) r.base.resize(hash);
        else ok = false;
    }
    *out = std::move(r);
    return ok;
}

std::string Event::dump_name() const { return event_dump_name(name, occurrence, decode, ubatch); }

}  // namespace ls
