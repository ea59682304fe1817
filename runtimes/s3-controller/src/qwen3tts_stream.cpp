#include "qwen3tts_stream.h"

#include "ggml.h"
#include "llama-ext.h"  // llama_model_get_tok_embd: the talker's embedding table (staging API)

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>

namespace {

double seconds() {
    using namespace std::chrono;
    return duration_cast<duration<double>>(steady_clock::now().time_since_epoch()).count();
}

// the --tts-lang codes llama-tts takes, and the codec language rows they name
const std::map<std::string, std::string> & lang_names() {
    static const std::map<std::string, std::string> names = {
        {"zh", "chinese"}, {"en", "english"},    {"de", "german"},  {"it", "italian"},
        {"pt", "portuguese"}, {"es", "spanish"}, {"ja", "japanese"}, {"ko", "korean"},
        {"fr", "french"},  {"ru", "russian"},
    };
    return names;
}

}  // namespace

qwen3tts_stream::qwen3tts_stream(llama_context * lctx, mtmd_context * mctx)
    : lctx(lctx), mctx(mctx), model(llama_get_model(lctx)), vocab(llama_model_get_vocab(model)),
      n_embd(llama_model_n_embd(model)) {}

qwen3tts_stream::~qwen3tts_stream() {
    if (batch) {
        llama_batch_ext_free(batch);
    }
}

llama_token qwen3tts_stream::find(const std::string & text) const {
    const int32_t n = llama_vocab_n_tokens(vocab);
    for (llama_token t = 0; t < n; t++) {
        const char * s = llama_vocab_get_text(vocab, t);
        if (s && text == s) {
            return t;
        }
    }
    return LLAMA_TOKEN_NULL;
}

std::vector<float> qwen3tts_stream::row(llama_token t) const {
    return std::vector<float>(tok_embd.begin() + (size_t) t * n_embd, tok_embd.begin() + (size_t) (t + 1) * n_embd);
}

bool qwen3tts_stream::init(std::string & err) {
    const mtmd_gen_audio_info info = mtmd_gen_audio_get_info(mctx);
    if (info.type != MTMD_GEN_AUDIO_TYPE_QWEN3TTS) {
        err = "the mmproj is not a Qwen3-TTS gen-audio projector (qwen3tts_gen)";
        return false;
    }
    rate = info.sample_rate;
    struct {
        llama_token * slot;
        const char * text;
    } specials[] = {
        {&codec_0, "<|codec_0|>"},           {&codec_bos, "<|codec_bos|>"},
        {&codec_eos, "<|codec_eos_token|>"}, {&codec_pad, "<|codec_pad|>"},
        {&think, "<|codec_think|>"},         {&think_bos, "<|codec_think_bos|>"},
        {&think_eos, "<|codec_think_eos|>"}, {&tts_pad, "<tts_pad>"},
        {&tts_bos, "<tts_text_bos>"},        {&tts_eos, "<tts_text_eod>"},
    };
    for (auto & s : specials) {
        *s.slot = find(s.text);
        if (*s.slot == LLAMA_TOKEN_NULL) {
            err = std::string("the talker's vocabulary has no ") + s.text;
            return false;
        }
    }
    const uint32_t n = llama_model_get_tok_embd(model, nullptr);
    if (n == 0) {
        err = "the talker has no token embeddings";
        return false;
    }
    tok_embd.resize(n);
    if (llama_model_get_tok_embd(model, tok_embd.data()) != n) {
        err = "copying the talker's token embeddings failed";
        return false;
    }
    const llama_rope_type rt = llama_model_rope_type(model);
    mrope = rt == LLAMA_ROPE_TYPE_MROPE || rt == LLAMA_ROPE_TYPE_IMROPE;
    if (!batch) {
        batch = llama_batch_ext_init(lctx);
    }
    return true;
}

bool qwen3tts_stream::decode_rows(const float * rows, int n_rows, bool last_logits, std::string & err) {
    llama_batch_ext_clear(batch);
    for (int i = 0; i < n_rows; i++) {
        const llama_embd e = {rows + (size_t) i * n_embd, 1, (size_t) n_embd};
        const int32_t idx = llama_batch_ext_add_embd(batch, 0, e);
        if (idx < 0) {
            err = "llama_batch_ext_add_embd failed";
            return false;
        }
        llama_pos p[GGML_MROPE_SECTIONS] = {0, 0, 0, 0};
        const int n_pos = mrope ? 4 : 1;  // M-RoPE on a 1-D stream: every section at the same position
        for (int j = 0; j < n_pos; j++) {
            p[j] = pos + i;
        }
        llama_batch_ext_set_pos(batch, idx, p);
        if (last_logits && i == n_rows - 1) {
            llama_batch_ext_set_output_logits(batch, idx, true);
        }
    }
    if (llama_process(lctx, LLAMA_PROCESS_TYPE_DECODE, batch) != 0) {
        err = "talker decode failed";
        return false;
    }
    pos += n_rows;
    return true;
}

bool qwen3tts_stream::begin(const qwen3tts_request & req, std::string & err) {
    llama_memory_clear(llama_get_memory(lctx), true);
    pos = 0;
    codes.clear();
    committed.clear();
    commit = emitted = wav_calls = 0;
    t_decode = t_code = 0;
    seed = req.seed;
    const mtmd_gen_inp def = mtmd_gen_inp_default(mctx);
    top_k = req.top_k > 0 ? req.top_k : def.top_k;
    top_p = req.top_p > 0 ? req.top_p : def.top_p;

    const std::string code = req.lang.empty() ? "en" : req.lang;
    const auto it = lang_names().find(code);
    const std::string lang = it != lang_names().end() ? it->second : code;
    const llama_token c_lang = find("<|codec_language_" + lang + "|>");
    if (c_lang == LLAMA_TOKEN_NULL) {
        err = "unknown language '" + code + "' (no <|codec_language_" + lang + "|> in the vocabulary)";
        return false;
    }

    // the upstream chat wrap: ids [0, 3) are the role, [3, n - 5) the text to speak
    const std::string full = "<|im_start|>assistant\n" + req.text + "<|im_end|>\n<|im_start|>assistant\n";
    std::vector<llama_token> ids(full.size() + 16);
    int n_ids = llama_tokenize(vocab, full.c_str(), (int32_t) full.size(), ids.data(), (int32_t) ids.size(), false, true);
    if (n_ids < 0) {
        ids.resize((size_t) -n_ids);
        n_ids = llama_tokenize(vocab, full.c_str(), (int32_t) full.size(), ids.data(), (int32_t) ids.size(), false, true);
    }
    if (n_ids < 8) {
        err = "tokenizing the text failed";
        return false;
    }

    std::vector<float> rows;
    rows.reserve((size_t) (n_ids + 8) * n_embd);
    auto push = [&](llama_token a) {
        const float * ra = tok_embd.data() + (size_t) a * n_embd;
        rows.insert(rows.end(), ra, ra + n_embd);
    };
    auto push_sum = [&](llama_token a, llama_token b) {
        const float * ra = tok_embd.data() + (size_t) a * n_embd;
        const float * rb = tok_embd.data() + (size_t) b * n_embd;
        for (int i = 0; i < n_embd; i++) {
            rows.push_back(ra[i] + rb[i]);
        }
    };
    for (int i = 0; i < 3; i++) {
        push(ids[(size_t) i]);
    }
    push_sum(tts_pad, think);
    push_sum(tts_pad, think_bos);
    push_sum(tts_pad, c_lang);
    push_sum(tts_pad, think_eos);
    push_sum(tts_bos, codec_pad);
    for (int i = 3; i < n_ids - 5; i++) {
        push_sum(ids[(size_t) i], codec_pad);
    }
    push_sum(tts_eos, codec_pad);
    push_sum(tts_pad, codec_bos);

    const int n_rows = (int) (rows.size() / (size_t) n_embd);
    const int n_batch = std::max(1, req.n_batch);
    for (int at = 0; at < n_rows; at += n_batch) {
        const int n = std::min(n_batch, n_rows - at);
        if (!decode_rows(rows.data() + (size_t) at * n_embd, n, at + n == n_rows, err)) {
            return false;
        }
    }
    const float * he = llama_get_embeddings_ith(lctx, -1);
    if (!he) {
        err = "the talker returned no hidden state (is the context made with embeddings on?)";
        return false;
    }
    h_state.assign(he, he + n_embd);
    pad_row = row(tts_pad);
    return true;
}

int qwen3tts_stream::step(llama_token sampled, std::string & err) {
    if (sampled == codec_eos || llama_vocab_is_eog(vocab, sampled)) {
        return 0;
    }
    mtmd_gen_inp inp = mtmd_gen_inp_default(mctx);
    inp.type = MTMD_GEN_PROCESS_TYPE_GEN_CODE;
    inp.code0 = sampled - codec_0;
    inp.embd = h_state.data();
    inp.top_k = top_k;
    inp.top_p = top_p;
    inp.seed = seed;
    mtmd_gen_out out{};
    const double t0 = seconds();
    if (mtmd_gen_audio_process(mctx, &inp, &out) != 0) {
        err = "GEN_CODE (code predictor) failed";
        return -1;
    }
    const double t1 = seconds();
    t_code += t1 - t0;
    if (out.n_codes == 0) {
        err = "GEN_CODE returned no codes";
        return -1;
    }
    n_codebooks = (int) out.n_codes;
    codes.insert(codes.end(), out.codes, out.codes + out.n_codes);

    std::vector<float> fb(out.embd, out.embd + n_embd);
    for (int i = 0; i < n_embd; i++) {
        fb[(size_t) i] += pad_row[(size_t) i];
    }
    if (!decode_rows(fb.data(), 1, true, err)) {
        return -1;
    }
    t_decode += seconds() - t1;
    const float * he = llama_get_embeddings_ith(lctx, -1);
    h_state.assign(he, he + n_embd);
    return 1;
}

bool qwen3tts_stream::gen_wav(int from, int to, const std::vector<uint8_t> & state, std::vector<float> & pcm,
                              std::vector<uint8_t> * state_out, std::string & err) {
    std::vector<int32_t> batch_codes(codes.begin() + (size_t) from * n_codebooks, codes.begin() + (size_t) to * n_codebooks);
    mtmd_gen_inp inp = mtmd_gen_inp_default(mctx);
    inp.type = MTMD_GEN_PROCESS_TYPE_GEN_WAV;
    inp.codes = batch_codes.data();
    inp.n_codes = batch_codes.size();
    inp.seed = seed;  // the code predictor's seed: a new one would reseed clip's generator mid-utterance
    inp.state_data = state.empty() ? nullptr : (const char *) state.data();
    inp.state_size = state.size();
    mtmd_gen_out out{};
    wav_calls++;
    if (mtmd_gen_audio_process(mctx, &inp, &out) != 0) {
        err = "GEN_WAV (code2wav) failed";
        return false;
    }
    pcm.assign(out.audio, out.audio + out.n_samples);
    if (state_out) {
        state_out->assign(out.state_data, out.state_data + out.state_size);
    }
    return true;
}

bool qwen3tts_stream::decode_until(int upto, std::vector<float> & out, std::string & err) {
    upto = std::min(upto, n_frames());
    std::vector<float> pcm;
    while (upto - commit >= window_frames) {  // a whole window: its state is the real one, commit it
        std::vector<uint8_t> next;
        if (!gen_wav(commit, commit + window_frames, committed, pcm, &next, err)) {
            return false;
        }
        const size_t skip = (size_t) (emitted - commit) * samples_per_frame;
        out.insert(out.end(), pcm.begin() + (long) std::min(skip, pcm.size()), pcm.end());
        committed.swap(next);
        commit += window_frames;
        emitted = commit;
    }
    if (upto > emitted) {  // part of a window: decoded from the committed state, which stays as it was
        if (!gen_wav(commit, upto, committed, pcm, nullptr, err)) {
            return false;
        }
        const size_t skip = (size_t) (emitted - commit) * samples_per_frame;
        out.insert(out.end(), pcm.begin() + (long) std::min(skip, pcm.size()), pcm.end());
        emitted = upto;
    }
    return true;
}
