// edgelab's event protocol (JSON lines, schema 1; README "The edgelab event protocol") as written
// by a C++ program: one object per line on stdout, flushed per line, `t` in seconds since the Unix
// epoch on this machine's clock. SHA-256 and base64 are here so the controller needs no library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace edgelab {

double now_s();  // wall clock, seconds since the epoch

std::string sha256_hex(const uint8_t * data, size_t n);
std::string base64(const uint8_t * data, size_t n);

// s16le PCM from float samples, as llama.cpp's WAV writer makes it (clamp to [-1, 1], x 32767, truncate)
std::vector<uint8_t> pcm16(const float * x, size_t n);

// A JSON object built field by field; str() is one line without its newline.
class obj {
public:
    obj & s(const char * key, const std::string & v);
    obj & s_or_null(const char * key, const std::string & v);  // "" -> null
    obj & i(const char * key, long long v);
    obj & f(const char * key, double v);
    obj & b(const char * key, bool v);
    obj & null(const char * key);
    obj & raw(const char * key, const std::string & json);  // an already encoded value
    std::string str() const { return "{" + body + "}"; }
    const std::string & inner() const { return body; }

private:
    void key(const char * k);
    std::string body;
};

std::string quote(const std::string & s);

// one event line: {"kind": KIND, "t": now, "run": RUN, ...fields}
class writer {
public:
    writer(FILE * out, std::string run) : out(out), run(std::move(run)) {}
    void emit(const char * kind, const obj & fields, double t = -1.0);

private:
    FILE * out;
    std::string run;
};

}  // namespace edgelab
