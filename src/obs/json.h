// The two JSON value writers the dump and the trace need: a quoted, escaped string
// and a number with microsecond precision.
#pragma once

#include <cstdio>
#include <string>

namespace gpurdma::obs {

inline std::string json_text(const std::string &s)
{
    std::string out = "\"";
    for (const char c : s) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\t': out += "\\t"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    char esc[8];
                    std::snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
                    out += esc;
                } else {
                    out += c;
                }
        }
    }
    return out + "\"";
}

inline std::string json_number(double v, int decimals = 6)
{
    char text[48];
    std::snprintf(text, sizeof text, "%.*f", decimals, v);
    return text;
}

}  // namespace gpurdma::obs
