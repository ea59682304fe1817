#include "events.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

namespace edgelab {

double now_s() {
    using namespace std::chrono;
    return duration_cast<duration<double>>(system_clock::now().time_since_epoch()).count();
}

// ---- SHA-256 (FIPS 180-4) -------------------------------------------------------------------

namespace {

const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

void block(uint32_t h[8], const uint8_t * p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++) {
        w[i] = (uint32_t) p[4 * i] << 24 | (uint32_t) p[4 * i + 1] << 16 | (uint32_t) p[4 * i + 2] << 8 | p[4 * i + 3];
    }
    for (int i = 16; i < 64; i++) {
        const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        const uint32_t t1 = k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += k;
}

}  // namespace

std::string sha256_hex(const uint8_t * data, size_t n) {
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        block(h, data + i);
    }
    uint8_t tail[128] = {0};
    const size_t rest = n - i;
    if (rest) {
        memcpy(tail, data + i, rest);
    }
    tail[rest] = 0x80;
    const size_t len = rest + 1 + 8 <= 64 ? 64 : 128;
    const uint64_t bits = (uint64_t) n * 8;
    for (int j = 0; j < 8; j++) {
        tail[len - 1 - j] = (uint8_t) (bits >> (8 * j));
    }
    block(h, tail);
    if (len == 128) {
        block(h, tail + 64);
    }
    static const char * hex = "0123456789abcdef";
    std::string out(64, '0');
    for (int j = 0; j < 8; j++) {
        for (int k = 0; k < 8; k++) {
            out[(size_t) (8 * j + k)] = hex[(h[j] >> (28 - 4 * k)) & 0xf];
        }
    }
    return out;
}

std::string base64(const uint8_t * data, size_t n) {
    static const char * tab = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((n + 2) / 3 * 4);
    for (size_t i = 0; i < n; i += 3) {
        const uint32_t v = (uint32_t) data[i] << 16 | (i + 1 < n ? (uint32_t) data[i + 1] << 8 : 0) |
                           (i + 2 < n ? data[i + 2] : 0);
        out += tab[(v >> 18) & 63];
        out += tab[(v >> 12) & 63];
        out += i + 1 < n ? tab[(v >> 6) & 63] : '=';
        out += i + 2 < n ? tab[v & 63] : '=';
    }
    return out;
}

std::vector<uint8_t> pcm16(const float * x, size_t n) {
    std::vector<uint8_t> out(n * 2);
    for (size_t i = 0; i < n; i++) {
        const int16_t s = (int16_t) (std::max(-1.0f, std::min(1.0f, x[i])) * 32767.0f);
        out[2 * i] = (uint8_t) (s & 0xff);
        out[2 * i + 1] = (uint8_t) ((uint16_t) s >> 8);
    }
    return out;
}

// ---- JSON -----------------------------------------------------------------------------------

std::string quote(const std::string & s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    snprintf(buf, sizeof(buf), "\\u%04x", c);
                    out += buf;
                } else {
                    out += (char) c;  // UTF-8 passes through unchanged
                }
        }
    }
    return out + "\"";
}

void obj::key(const char * k) {
    if (!body.empty()) {
        body += ",";
    }
    body += quote(k) + ":";
}

obj & obj::s(const char * k, const std::string & v) { key(k); body += quote(v); return *this; }
obj & obj::s_or_null(const char * k, const std::string & v) { return v.empty() ? null(k) : s(k, v); }
obj & obj::i(const char * k, long long v) { key(k); body += std::to_string(v); return *this; }
obj & obj::b(const char * k, bool v) { key(k); body += v ? "true" : "false"; return *this; }
obj & obj::null(const char * k) { key(k); body += "null"; return *this; }
obj & obj::raw(const char * k, const std::string & json) { key(k); body += json; return *this; }

obj & obj::f(const char * k, double v) {
    key(k);
    if (!std::isfinite(v)) {
        body += "null";  // JSON has no NaN or infinity: unknown is null
        return *this;
    }
    char buf[32];
    snprintf(buf, sizeof(buf), "%.6f", v);
    body += buf;
    return *this;
}

void writer::emit(const char * kind, const obj & fields, double t) {
    obj head;
    head.s("kind", kind).f("t", t < 0 ? now_s() : t);
    head.s_or_null("run", run);
    std::string line = "{" + head.inner();
    if (!fields.inner().empty()) {
        line += "," + fields.inner();
    }
    line += "}\n";
    fputs(line.c_str(), out);
    fflush(out);
}

}  // namespace edgelab
