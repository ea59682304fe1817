// s3-controller: edgelab's S3 for Qwen3-TTS on llama.cpp. Runs the talker frame by frame, decodes
// code2wav chunk by chunk on the deploy profile's schedule, and prints edgelab's events (JSON lines
// on stdout; llama.cpp's own log stays on stderr).
//
//   s3-controller -m talker.gguf --mmproj mmproj.gguf -t 4 -s 1 -n 40 --text "Hello." \
//       --schedule 2,4,8,16,25 --warmup 1 --requests 20 --run RUN --device s25
//   s3-controller -m ... --mmproj ... --serve [--pcm]     # requests as JSON lines on stdin
//
// Every option llama-tts takes (-m, --mmproj, -t, -s, -n, -c, -ngl, --tts-lang, sampling) is read
// by llama.cpp's own parser with llama-tts's defaults, so the same flags give the same frames.
// Cancel: a line `cancel` (or {"cancel": ...}) on stdin ends the current utterance and the run goes
// on; SIGINT or SIGTERM ends the utterance and the run (run.end "stopped"). Random weights never
// sample end-of-speech, so -n (or a request's "frames") bounds every utterance.
#include "arg.h"
#include "build-info.h"
#include "common.h"
#include "llama.h"
#include "log.h"
#include "mtmd-helper.h"
#include "mtmd.h"
#include "sampling.h"

#include "events.h"
#include "qwen3tts_stream.h"

#include <nlohmann/json.hpp>

#if defined(_WIN32)
#    define PSAPI_VERSION 2  // GetProcessMemoryInfo from kernel32, no psapi.lib to link
#    include <windows.h>
#    include <psapi.h>
#endif

#include <atomic>
#include <fstream>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using json = nlohmann::ordered_json;

namespace {

std::atomic<bool> g_stop{false};    // a signal: end the utterance and the run
std::atomic<bool> g_cancel{false};  // stdin: end the utterance, keep running

void on_signal(int) { g_stop = true; }

// this process's peak resident set in bytes (VmHWM; PeakWorkingSetSize on Windows), -1 when unknown
long long peak_rss() {
#if defined(_WIN32)
    PROCESS_MEMORY_COUNTERS pmc;
    if (GetProcessMemoryInfo(GetCurrentProcess(), &pmc, sizeof(pmc))) {
        return (long long) pmc.PeakWorkingSetSize;
    }
    return -1;
#else
    std::ifstream f("/proc/self/status");
    std::string key;
    while (f >> key) {
        if (key == "VmHWM:") {
            long long kb = -1;
            f >> kb;
            return kb < 0 ? -1 : kb * 1024;
        }
        f.ignore(1 << 12, '\n');
    }
    return -1;
#endif
}

struct options {
    std::vector<std::string> texts;
    std::string band = "short";
    std::string schedule = "ramp";
    std::string run, device;
    int requests = 1;
    int warmup = 0;
    int frames = 0;      // 0: -n, else llama-tts's 512
    bool serve = false;  // requests from stdin
    bool pcm = false;    // base64 PCM on every audio.chunk (for a lab-side speech server)
    int pause_ms = 0;    // between requests
};

struct job {
    std::string id, text, phase = "measured", band, schedule, lang;
    int frames = 0;
    long long seed = -1;
    bool pcm = false;
};

// stdin: requests (serve mode) and cancels, read on a thread so a cancel lands mid-utterance
struct inbox {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<json> jobs;
    bool eof = false;

    void run(bool serve) {
        std::string line;
        while (std::getline(std::cin, line)) {
            if (line.empty()) {
                continue;
            }
            if (line == "cancel") {
                g_cancel = true;
                continue;
            }
            json j = json::parse(line, nullptr, false);
            if (j.is_discarded() || !j.is_object()) {
                fprintf(stderr, "s3-controller: ignoring a stdin line that is not a JSON object\n");
                continue;
            }
            if (j.contains("cancel")) {
                g_cancel = true;
                continue;
            }
            if (serve) {
                std::lock_guard<std::mutex> lk(mu);
                jobs.push_back(std::move(j));
                cv.notify_all();
            }
        }
        std::lock_guard<std::mutex> lk(mu);
        eof = true;
        cv.notify_all();
    }

    bool next(json & out) {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait_for(lk, std::chrono::milliseconds(200), [&] { return !jobs.empty() || eof; });
        if (jobs.empty()) {
            return false;
        }
        out = std::move(jobs.front());
        jobs.pop_front();
        return true;
    }

    bool done() {
        std::lock_guard<std::mutex> lk(mu);
        return eof && jobs.empty();
    }
};

std::vector<int> parse_schedule(const std::string & s) {
    if (s == "ramp" || s.empty()) {
        return {2, 4, 8, 16, 25};
    }
    if (s == "server") {
        return {1, 25};
    }
    std::vector<int> out;
    size_t at = 0;
    while (at <= s.size()) {
        const size_t comma = s.find(',', at);
        const std::string part = s.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        const int v = atoi(part.c_str());
        if (v < 1) {
            return {};
        }
        out.push_back(v);
        if (comma == std::string::npos) {
            break;
        }
        at = comma + 1;
    }
    return out;
}

std::string schedule_json(const std::vector<int> & s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); i++) {
        out += (i ? "," : "") + std::to_string(s[i]);
    }
    return out + "]";
}

bool take(const std::string & a, const char * name, int & i, int argc, char ** argv, std::string & out) {
    if (a != name) {
        return false;
    }
    if (i + 1 >= argc) {
        fprintf(stderr, "error: %s needs a value\n", name);
        exit(2);
    }
    out = argv[++i];
    return true;
}

// edgelab's own options out of argv; what is left goes to llama.cpp's parser
std::vector<char *> split_args(int argc, char ** argv, options & o) {
    std::vector<char *> rest = {argv[0]};
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        std::string v;
        if (take(a, "--text", i, argc, argv, v)) {
            o.texts.push_back(v);
        } else if (take(a, "--band", i, argc, argv, v)) {
            o.band = v;
        } else if (take(a, "--schedule", i, argc, argv, v)) {
            o.schedule = v;
        } else if (take(a, "--run", i, argc, argv, v)) {
            o.run = v;
        } else if (take(a, "--device", i, argc, argv, v)) {
            o.device = v;
        } else if (take(a, "--requests", i, argc, argv, v)) {
            o.requests = atoi(v.c_str());
        } else if (take(a, "--warmup", i, argc, argv, v)) {
            o.warmup = atoi(v.c_str());
        } else if (take(a, "--frames", i, argc, argv, v)) {
            o.frames = atoi(v.c_str());
        } else if (take(a, "--pause-ms", i, argc, argv, v)) {
            o.pause_ms = atoi(v.c_str());
        } else if (a == "--serve") {
            o.serve = true;
        } else if (a == "--pcm") {
            o.pcm = true;
        } else {
            rest.push_back(argv[i]);
        }
    }
    return rest;
}

void usage(int, char ** argv) {
    LOG("\nusage: %s -m talker.gguf --mmproj mmproj.gguf [-t N] [-s SEED] [-n FRAMES] --text TEXT\n"
        "          [--schedule ramp|server|2,4,8,16,25] [--warmup N] [--requests N] [--run ID] [--device NAME]\n"
        "          [--serve] [--pcm] [--pause-ms MS]\n\n", argv[0]);
}

struct totals {
    long long frames = 0;
    double talker_s = 0, code2wav_s = 0, prompt_s = 0;
    double loop_s = 0;  // first frame to request.end, events included: what s3-bare's loop_s is
    double talker_decode_s = 0, code_predictor_s = 0;
    int wav_calls = 0, requests = 0, failed = 0, cancelled = 0;
};

class controller {
public:
    controller(common_params & params, common_init_result & init, mtmd_context * mctx, const options & o,
               edgelab::writer & w)
        : params(params), init(init), lctx(init.context()), stream(lctx, mctx), o(o), w(w) {}

    bool ready(std::string & err) { return stream.init(err); }
    const totals & sums() const { return tot; }
    int window() const { return stream.window(); }

    // one utterance; false when the run must end (a signal)
    bool speak(const job & jb, int index) {
        const std::vector<int> sched = parse_schedule(jb.schedule.empty() ? o.schedule : jb.schedule);
        w.emit("request.start", edgelab::obj()
                                    .s("request", jb.id)
                                    .s("phase", jb.phase)
                                    .s_or_null("band", jb.band)
                                    .s("input", jb.text));
        if (sched.empty()) {
            return finish(jb, false, "bad chunk schedule " + jb.schedule, 0, "error");
        }
        g_cancel = false;
        tot.requests++;

        // the sampler llama-tts would have for this seed: the first request uses llama.cpp's own
        uint32_t seed = params.sampling.seed;
        if (jb.seed >= 0) {
            seed = (uint32_t) jb.seed;
        } else if (params.sampling.seed != LLAMA_DEFAULT_SEED) {
            seed = params.sampling.seed + (uint32_t) index;
        }
        common_sampler * smpl = init.sampler(0);
        common_sampler_ptr own;
        if (index > 0 || seed != params.sampling.seed) {
            common_params_sampling sp = params.sampling;
            sp.seed = seed;
            own.reset(common_sampler_init(llama_get_model(lctx), sp));
            smpl = own.get();
        }
        auto sample = [&]() {
            const llama_token t = common_sampler_sample(smpl, lctx, -1);
            common_sampler_accept(smpl, t, true);
            return t;
        };

        qwen3tts_request rq;
        rq.text = jb.text;
        rq.lang = jb.lang.empty() ? params.tts_lang : jb.lang;
        rq.seed = seed;
        rq.top_k = params.sampling.top_k;
        rq.top_p = params.sampling.top_p;
        rq.n_batch = params.n_batch;
        std::string err;
        const double t_prompt = edgelab::now_s();
        if (!stream.begin(rq, err)) {
            return finish(jb, false, err, 0, "error");
        }
        llama_token sampled = sample();
        const double t_gen = edgelab::now_s();
        t_loop0 = t_gen;
        stage(jb.id, "prompt", t_prompt, t_gen);
        tot.prompt_s += t_gen - t_prompt;

        const int budget = jb.frames > 0 ? jb.frames : 512;
        int next = 0, chunk = 0, idx = 0;
        auto boundary = [&]() {
            next += sched[(size_t) std::min(chunk, (int) sched.size() - 1)];
            chunk++;
        };
        boundary();
        std::string stop = "budget";
        double t_chunk = t_gen;
        std::vector<float> pcm;
        bool sent_terminal = false;
        while (stream.n_frames() < budget) {
            if (g_stop || g_cancel) {
                stop = "cancelled";
                break;
            }
            const int r = stream.step(sampled, err);
            if (r < 0) {
                return finish(jb, false, err, stream.n_frames(), "error");
            }
            if (r == 0) {
                stop = "eos";
                break;
            }
            sampled = sample();
            const int n = stream.n_frames();
            if (n >= next || n >= budget) {
                const bool last = n >= budget;
                if (!chunk_out(jb, idx++, n, last, t_chunk, pcm, err)) {
                    return finish(jb, false, err, n, "error");
                }
                sent_terminal = last;
                t_chunk = edgelab::now_s();
                while (next <= n) {
                    boundary();
                }
            }
        }
        if (stop == "cancelled") {
            tot.cancelled++;
            return finish(jb, false, "cancelled", stream.n_frames(), stop) && !g_stop;
        }
        if (!sent_terminal) {  // end of speech: what is left, or an empty terminal marker
            if (!chunk_out(jb, idx++, stream.n_frames(), true, t_chunk, pcm, err)) {
                return finish(jb, false, err, stream.n_frames(), "error");
            }
        }
        return finish(jb, true, "", stream.n_frames(), stop);
    }

private:
    void stage(const std::string & rid, const char * name, double start, double end) {
        w.emit("stage", edgelab::obj().s("request", rid).s("stage", name).f("start", start).f("end", end));
    }

    bool chunk_out(const job & jb, int idx, int upto, bool terminal, double t_chunk, std::vector<float> & pcm,
                   std::string & err) {
        const double t_talker = edgelab::now_s();
        pcm.clear();
        const int calls = stream.n_wav_calls();
        const int from = stream.n_emitted();
        if (!stream.decode_until(upto, pcm, err)) {
            return false;
        }
        const double t_wav = edgelab::now_s();
        tot.talker_s += t_talker - t_chunk;
        tot.code2wav_s += t_wav - t_talker;
        tot.wav_calls += stream.n_wav_calls() - calls;
        stage(jb.id, "talker", t_chunk, t_talker);
        stage(jb.id, "code2wav", t_talker, t_wav);
        const std::vector<uint8_t> bytes = edgelab::pcm16(pcm.data(), pcm.size());
        edgelab::obj f;
        f.s("request", jb.id)
            .i("idx", idx)
            .i("samples", (long long) pcm.size())
            .i("sample_rate", stream.sample_rate())
            .s("sha256", edgelab::sha256_hex(bytes.data(), bytes.size()))
            .b("terminal", terminal)
            .i("frames", upto - from);
        if (jb.pcm) {
            f.s("pcm", edgelab::base64(bytes.data(), bytes.size()));
        }
        w.emit("audio.chunk", f);
        rss_event();
        return true;
    }

    bool finish(const job & jb, bool ok, const std::string & error, int frames, const std::string & stop) {
        tot.frames += frames;
        if (t_loop0 > 0) {  // the request got to its frames: its engine times are its own
            tot.talker_decode_s += stream.talker_decode_s();
            tot.code_predictor_s += stream.code_predictor_s();
            tot.loop_s += edgelab::now_s() - t_loop0;
            t_loop0 = 0;
        }
        if (!ok && stop != "cancelled") {
            tot.failed++;
            w.emit("error", edgelab::obj().s("cls", "workload").s("message", error).s("request", jb.id));
        }
        w.emit("request.end", edgelab::obj()
                                  .s("request", jb.id)
                                  .b("ok", ok)
                                  .s_or_null("error", error)
                                  .i("frames", frames)
                                  .s("stop", stop)
                                  .i("wav_calls", stream.n_wav_calls()));
        rss_event();
        return true;
    }

    // the process's own high-water mark, what a run reports as its peak RSS (after every chunk,
    // so a live view has it before the first utterance ends)
    void rss_event() {
        const long long rss = peak_rss();
        if (rss > 0) {
            w.emit("resource", edgelab::obj().s_or_null("device", o.device).s("source", "proc").i("rss_bytes", rss));
        }
    }

    common_params & params;
    common_init_result & init;
    llama_context * lctx;
    qwen3tts_stream stream;
    const options & o;
    edgelab::writer & w;
    totals tot;
    double t_loop0 = 0;
};

std::string placement(const common_params & params, bool mmproj) {
    bool gpu = false;
    for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
        const auto type = ggml_backend_dev_type(ggml_backend_dev_get(i));
        gpu = gpu || type == GGML_BACKEND_DEVICE_TYPE_GPU || type == GGML_BACKEND_DEVICE_TYPE_IGPU;
    }
    const bool used = mmproj ? params.mmproj_use_gpu : params.n_gpu_layers != 0;
    return gpu && used ? "gpu" : "cpu";
}

}  // namespace

int main(int argc, char ** argv) {
    options o;
    std::vector<char *> rest = split_args(argc, argv, o);
    common_params params;
    common_init();
    if (!common_params_parse((int) rest.size(), rest.data(), params, LLAMA_EXAMPLE_TTS, usage)) {
        return 2;
    }
    if (params.mmproj.path.empty()) {
        fprintf(stderr, "error: no mmproj given (--mmproj FILE: the code predictor and code2wav)\n");
        return 2;
    }
    if (o.texts.empty() && !params.prompt.empty()) {
        o.texts.push_back(params.prompt);
    }
    if (!o.serve && o.texts.empty()) {
        fprintf(stderr, "error: no text to speak (--text TEXT or -p TEXT), or --serve for requests on stdin\n");
        return 2;
    }
    if (parse_schedule(o.schedule).empty()) {
        fprintf(stderr, "error: bad --schedule %s (ramp, server, or frame counts like 2,4,8,16,25)\n",
                o.schedule.c_str());
        return 2;
    }
    if (o.frames <= 0 && params.n_predict > 0) {
        o.frames = params.n_predict;
    }
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);

    edgelab::writer w(stdout, o.run);
    mtmd_helper_log_set(common_log_default_callback, nullptr);
    params.embedding = true;  // the talker's hidden state feeds the code predictor
    llama_backend_init();
    llama_numa_init(params.numa);

    const double t_load = edgelab::now_s();
    common_init_result_ptr init = common_init_from_params(params);
    llama_context * lctx = init ? init->context() : nullptr;
    if (!lctx) {
        w.emit("error", edgelab::obj().s("cls", "workload").s("message", "failed to load the talker " + params.model.path));
        w.emit("run.end", edgelab::obj().s("state", "failed").s("error", "talker load failed"));
        return 1;
    }
    mtmd_context_params mp = mtmd_context_params_default();  // as llama-tts: 4 threads for the projector
    mp.use_gpu = params.mmproj_use_gpu;
    mp.device = params.mmproj_device;
    mtmd::context_ptr mctx(mtmd_init_from_file(params.mmproj.path.c_str(), init->model(), mp));
    if (!mctx) {
        w.emit("error", edgelab::obj().s("cls", "workload").s("message", "failed to load the mmproj " + params.mmproj.path));
        w.emit("run.end", edgelab::obj().s("state", "failed").s("error", "mmproj load failed"));
        return 1;
    }
    controller c(params, *init, mctx.get(), o, w);
    std::string err;
    if (!c.ready(err)) {
        w.emit("error", edgelab::obj().s("cls", "workload").s("message", err));
        w.emit("run.end", edgelab::obj().s("state", "failed").s("error", err));
        return 1;
    }
    const double t_up = edgelab::now_s();

    const std::string cpu_or_gpu = placement(params, false), proj = placement(params, true);
    auto where = [](const std::string & observed, const std::string & detail) {
        return edgelab::obj().s("runtime", "llama.cpp").s("observed", observed).s("detail", detail).str();
    };
    edgelab::obj meta;
    meta.s("engine", "llama.cpp (libllama talker, libmtmd GEN_CODE + GEN_WAV)")
        .s("controller", "s3-controller")
        .s("llama_commit", llama_commit())
        .s("talker", params.model.path)
        .s("mmproj", params.mmproj.path)
        .i("threads", params.cpuparams.n_threads)
        .i("mmproj_threads", mp.n_threads)
        .raw("schedule", schedule_json(parse_schedule(o.schedule)))
        .i("window_frames", c.window())
        .i("sample_rate", 24000)
        .i("frames", o.frames > 0 ? o.frames : 512)
        .raw("seed", params.sampling.seed == LLAMA_DEFAULT_SEED ? std::string("null") : std::to_string(params.sampling.seed))
        .s("band", o.band)
        .b("serve", o.serve)
        .raw("placement", edgelab::obj()
                              .raw("text_frontend", where("cpu", "llama_tokenize"))
                              .raw("talker", where(cpu_or_gpu, "libllama, -ngl " + std::to_string(params.n_gpu_layers)))
                              .raw("code_predictor", where(proj, "libmtmd GEN_CODE"))
                              .raw("code2wav", where(proj, "libmtmd GEN_WAV"))
                              .str());
    w.emit("run.start", edgelab::obj()
                            .s("pipeline", "qwen3-tts")
                            .s_or_null("device", o.device)
                            .s("runtime", "llama.cpp")
                            .s("strategy", "S3")
                            .raw("meta", meta.str()),
           t_up);
    w.emit("stage", edgelab::obj().null("request").s("stage", "load").f("start", t_load).f("end", t_up));

    inbox in;
    std::thread reader([&] { in.run(o.serve); });
    reader.detach();  // blocked on stdin until EOF; the process may end first

    bool stopped = false, after_cancel = false;
    int index = 0;
    auto one = [&](job jb) {
        if (after_cancel && jb.phase == "measured") {
            jb.phase = "after_cancel";
        }
        const int before = c.sums().cancelled;
        const bool go_on = c.speak(jb, index++);
        after_cancel = c.sums().cancelled > before;
        return go_on;
    };
    if (o.serve) {
        while (!g_stop && !in.done()) {
            json j;
            if (!in.next(j)) {
                continue;
            }
            job jb;
            jb.id = j.value("request", (o.run.empty() ? std::string("run") : o.run) + "-r" + std::to_string(index));
            jb.text = j.value("text", std::string());
            jb.phase = j.value("phase", std::string("measured"));
            jb.band = j.value("band", std::string());
            jb.schedule = j.value("schedule", std::string());
            jb.lang = j.value("lang", std::string());
            jb.frames = j.value("frames", o.frames);
            jb.seed = j.contains("seed") && j["seed"].is_number_integer() ? j["seed"].get<long long>() : -1;
            jb.pcm = j.value("pcm", o.pcm);
            if (!one(jb)) {
                stopped = true;
                break;
            }
        }
    } else {
        for (int i = 0; i < o.warmup + o.requests && !g_stop; i++) {
            job jb;
            char rid[64];
            snprintf(rid, sizeof(rid), "-r%03d", i);
            jb.id = (o.run.empty() ? std::string("run") : o.run) + rid;
            jb.text = o.texts[(size_t) i % o.texts.size()];
            jb.phase = i < o.warmup ? "warmup" : "measured";
            jb.band = o.band;
            jb.frames = o.frames;
            jb.pcm = o.pcm;
            if (!one(jb)) {
                stopped = true;
                break;
            }
            if (o.pause_ms > 0 && i + 1 < o.warmup + o.requests) {
                std::this_thread::sleep_for(std::chrono::milliseconds(o.pause_ms));
            }
        }
    }
    stopped = stopped || g_stop;

    const totals & t = c.sums();
    json summary = {
        {"requests", t.requests},
        {"failed", t.failed},
        {"cancelled", t.cancelled},
        {"frames", t.frames},
        {"load_s", t_up - t_load},
        {"prompt_s", t.prompt_s},
        {"talker_s", t.talker_s},
        {"code2wav_s", t.code2wav_s},
        {"wav_calls", t.wav_calls},
        {"loop_s", t.loop_s},
        {"talker_decode_s", t.talker_decode_s},
        {"code_predictor_s", t.code_predictor_s},
        {"talker_frames_per_s", t.talker_s > 0 ? t.frames / t.talker_s : 0.0},
        {"frames_per_s", t.loop_s > 0 ? t.frames / t.loop_s : 0.0},
    };
    w.emit("log", edgelab::obj().s("stream", "controller").s("level", "summary").s("line", summary.dump()));
    const char * state = stopped ? "stopped" : (t.failed ? "failed" : "finished");
    w.emit("run.end", edgelab::obj().s("state", state).s_or_null("error", stopped ? "stopped by a signal" : ""));
    fflush(stdout);
    llama_backend_free();
    // exit() runs the log's flush (atexit) and does not wait for the stdin reader, which may still
    // block on a read
    std::exit(stopped ? 130 : (t.failed ? 1 : 0));
}
