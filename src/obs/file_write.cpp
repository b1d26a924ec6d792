#include "obs/file_write.h"

#include <errno.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstring>

namespace gpurdma::obs {

std::string write_file(const std::string &dir, const std::string &name, const std::string &text, std::string *why)
{
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
        if (why) *why = "cannot make " + dir + ": " + std::strerror(errno);
        return "";
    }
    const std::string path = dir + "/" + name;
    const std::string part = path + ".part";
    FILE *f = std::fopen(part.c_str(), "w");
    if (!f) {
        if (why) *why = "cannot write " + part + ": " + std::strerror(errno);
        return "";
    }
    const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    if (std::fclose(f) != 0 || !written || std::rename(part.c_str(), path.c_str()) != 0) {
        if (why) *why = "cannot write " + path + ": " + std::strerror(errno);
        (void)std::remove(part.c_str());
        return "";
    }
    return path;
}

}  // namespace gpurdma::obs
