// s3-bare: the S3 controller's loop with nothing around it, the peer its overhead is measured
// against (benchmarks/llama_tts.py). The same engine (qwen3tts_stream), the same sampler and the
// same chunk schedule, but no events, no hashing, no stdin reader, no signal handling: the talker
// frame by frame and code2wav per chunk, timed as a whole. Prints one JSON line at the end.
//
//   s3-bare -m talker.gguf --mmproj mmproj.gguf -t 4 -s 1 -n 40 -p "Hello." [--schedule 2,4,8,16,25]
//           [--requests N] [--no-wav]
#include "arg.h"
#include "common.h"
#include "llama.h"
#include "log.h"
#include "mtmd-helper.h"
#include "mtmd.h"
#include "sampling.h"

#include "qwen3tts_stream.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

double now_s() {
    using namespace std::chrono;
    return duration_cast<duration<double>>(steady_clock::now().time_since_epoch()).count();
}

std::vector<int> schedule(const std::string & s) {
    if (s == "ramp") {
        return {2, 4, 8, 16, 25};
    }
    if (s == "server") {
        return {1, 25};
    }
    std::vector<int> out;
    for (size_t at = 0; at <= s.size();) {
        const size_t comma = s.find(',', at);
        out.push_back(atoi(s.substr(at, comma == std::string::npos ? std::string::npos : comma - at).c_str()));
        if (comma == std::string::npos) {
            break;
        }
        at = comma + 1;
    }
    return out;
}

}  // namespace

int main(int argc, char ** argv) {
    std::string sched_text = "ramp";
    int requests = 1;
    bool wav = true;
    std::vector<char *> rest = {argv[0]};
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        if (a == "--schedule" && i + 1 < argc) {
            sched_text = argv[++i];
        } else if (a == "--requests" && i + 1 < argc) {
            requests = atoi(argv[++i]);
        } else if (a == "--no-wav") {
            wav = false;
        } else {
            rest.push_back(argv[i]);
        }
    }
    common_params params;
    common_init();
    if (!common_params_parse((int) rest.size(), rest.data(), params, LLAMA_EXAMPLE_TTS)) {
        return 2;
    }
    const std::vector<int> sched = schedule(sched_text);
    const int budget = params.n_predict > 0 ? params.n_predict : 512;
    mtmd_helper_log_set(common_log_default_callback, nullptr);
    params.embedding = true;
    llama_backend_init();
    common_init_result_ptr init = common_init_from_params(params);
    if (!init || !init->context()) {
        fprintf(stderr, "error: cannot load %s\n", params.model.path.c_str());
        return 1;
    }
    mtmd_context_params mp = mtmd_context_params_default();
    mp.use_gpu = params.mmproj_use_gpu;
    mtmd::context_ptr mctx(mtmd_init_from_file(params.mmproj.path.c_str(), init->model(), mp));
    if (!mctx) {
        fprintf(stderr, "error: cannot load %s\n", params.mmproj.path.c_str());
        return 1;
    }
    llama_context * lctx = init->context();
    qwen3tts_stream stream(lctx, mctx.get());
    std::string err;
    if (!stream.init(err)) {
        fprintf(stderr, "error: %s\n", err.c_str());
        return 1;
    }

    long long frames = 0, samples = 0;
    double t_loop = 0, t_wav = 0, t_decode = 0, t_code = 0;
    for (int r = 0; r < requests; r++) {
        common_params_sampling sp = params.sampling;
        if (sp.seed != LLAMA_DEFAULT_SEED) {
            sp.seed += (uint32_t) r;
        }
        common_sampler_ptr smpl(common_sampler_init(init->model(), sp));
        qwen3tts_request rq;
        rq.text = params.prompt;
        rq.lang = params.tts_lang;
        rq.seed = sp.seed;
        rq.top_k = sp.top_k;
        rq.top_p = sp.top_p;
        rq.n_batch = params.n_batch;
        if (!stream.begin(rq, err)) {
            fprintf(stderr, "error: %s\n", err.c_str());
            return 1;
        }
        llama_token tok = common_sampler_sample(smpl.get(), lctx, -1);
        common_sampler_accept(smpl.get(), tok, true);
        const double t0 = now_s();  // from the first frame, as the controller's loop_s
        std::vector<float> pcm;
        int next = 0, chunk = 0;
        auto boundary = [&]() { next += sched[(size_t) std::min(chunk++, (int) sched.size() - 1)]; };
        boundary();
        while (stream.n_frames() < budget) {
            const int got = stream.step(tok, err);
            if (got <= 0) {
                break;
            }
            tok = common_sampler_sample(smpl.get(), lctx, -1);
            common_sampler_accept(smpl.get(), tok, true);
            if (wav && (stream.n_frames() >= next || stream.n_frames() >= budget)) {
                const double w0 = now_s();
                stream.decode_until(stream.n_frames(), pcm, err);
                t_wav += now_s() - w0;
                while (next <= stream.n_frames()) {
                    boundary();
                }
            }
        }
        if (wav) {
            const double w0 = now_s();
            stream.decode_until(stream.n_frames(), pcm, err);
            t_wav += now_s() - w0;
        }
        t_loop += now_s() - t0;
        t_decode += stream.talker_decode_s();
        t_code += stream.code_predictor_s();
        frames += stream.n_frames();
        samples += (long long) pcm.size();
    }
    printf("{\"frames\": %lld, \"samples\": %lld, \"loop_s\": %.6f, \"code2wav_s\": %.6f, "
           "\"talker_decode_s\": %.6f, \"code_predictor_s\": %.6f, \"frames_per_s\": %.4f, "
           "\"talker_frames_per_s\": %.4f, \"talker_decode_per_s\": %.4f}\n",
           frames, samples, t_loop, t_wav, t_decode, t_code, t_loop > 0 ? frames / t_loop : 0.0,
           (t_loop - t_wav) > 0 ? frames / (t_loop - t_wav) : 0.0, t_decode > 0 ? frames / t_decode : 0.0);
    fflush(stdout);
    llama_backend_free();
    return 0;
}
