// Qwen3-TTS as a stream over llama.cpp's own engine: the talker (libllama, arch qwen3tts) one frame
// at a time, the code predictor per frame (libmtmd GEN_CODE) and code2wav chunk by chunk (libmtmd
// GEN_WAV with its carried decoder state).
//
// The prompt, the per-frame feedback and the sampling follow upstream's helper
// (tools/mtmd/mtmd-helper-gen.cpp, qwen3tts pipeline), so a fixed seed gives the frames llama-tts
// gives. The helper keeps the codes to itself and vocodes once at the end; this class keeps them so
// that audio can leave after every chunk.
//
// Why the decoder state advances only on whole windows: GEN_WAV always runs a graph of one full
// window (72 frames, clip.cpp's wav_tfm_swa) and pads a shorter batch with code 0; the state it
// returns is that of the padded window. Carrying it after a short chunk would feed the padding to
// the next chunk as left context. So a chunk is decoded from the state committed at the last
// window boundary (the frames since then, plus the new ones), only its new samples are sent, and
// the state is committed when a window fills. Each frame's samples depend only on earlier frames
// (causal attention and convolutions), so the audio is the audio of one pass: llama-tts's bytes.
#pragma once

#include "llama.h"
#include "mtmd.h"

#include <cstdint>
#include <string>
#include <vector>

struct qwen3tts_request {
    std::string text;
    std::string lang = "en";  // a --tts-lang code (en, zh, ...) or a language name
    uint32_t seed = 0xFFFFFFFF;
    int32_t top_k = 50;
    float top_p = 1.0f;
    int32_t n_batch = 2048;  // prompt rows per decode call
};

class qwen3tts_stream {
public:
    static constexpr int samples_per_frame = 1920;  // 24 kHz / 12.5 Hz

    qwen3tts_stream(llama_context * lctx, mtmd_context * mctx);
    ~qwen3tts_stream();

    // special tokens and the embedding table; false (with err) when the model is not Qwen3-TTS
    bool init(std::string & err);

    // a new utterance: clears the talker's cache and decodes the prompt
    bool begin(const qwen3tts_request & req, std::string & err);

    // the talker's state after the prompt or the last frame (what the next sample is drawn from)
    const float * hidden() const { return h_state.data(); }

    // one frame from the token the talker sampled: 1 a frame was made, 0 end of speech, -1 error
    int step(llama_token sampled, std::string & err);

    int n_frames() const { return (int) (codes.size() / n_codebooks); }
    int n_emitted() const { return emitted; }
    int window() const { return window_frames; }
    int sample_rate() const { return rate; }

    // PCM of frames [n_emitted(), upto) appended to out; the decoder state is committed when a
    // window fills. n_calls counts GEN_WAV calls (each one is a whole-window graph).
    bool decode_until(int upto, std::vector<float> & out, std::string & err);
    int n_wav_calls() const { return wav_calls; }

    // seconds spent since begin() in the talker's forward passes (libllama) and in the code
    // predictor (GEN_CODE): what a frame costs before code2wav, split by engine
    double talker_decode_s() const { return t_decode; }
    double code_predictor_s() const { return t_code; }

private:
    bool gen_wav(int from, int to, const std::vector<uint8_t> & state, std::vector<float> & pcm,
                 std::vector<uint8_t> * state_out, std::string & err);
    bool decode_rows(const float * rows, int n_rows, bool last_logits, std::string & err);
    std::vector<float> row(llama_token t) const;
    llama_token find(const std::string & text) const;

    llama_context * lctx;
    mtmd_context * mctx;
    const llama_model * model;
    const llama_vocab * vocab;
    int n_embd;
    bool mrope = false;
    int rate = 24000;
    int n_codebooks = 16;
    int window_frames = 72;  // clip.cpp: hparams.wav_tfm_swa for PROJECTOR_TYPE_QWEN3TTS_GEN

    std::vector<float> tok_embd;  // the talker's embedding table, n_vocab x n_embd
    llama_token codec_0 = LLAMA_TOKEN_NULL, codec_bos = LLAMA_TOKEN_NULL, codec_eos = LLAMA_TOKEN_NULL,
                codec_pad = LLAMA_TOKEN_NULL, think = LLAMA_TOKEN_NULL, think_bos = LLAMA_TOKEN_NULL,
                think_eos = LLAMA_TOKEN_NULL, tts_pad = LLAMA_TOKEN_NULL, tts_bos = LLAMA_TOKEN_NULL,
                tts_eos = LLAMA_TOKEN_NULL;

    // per utterance
    llama_batch_ext * batch = nullptr;
    int pos = 0;
    uint32_t seed = 0xFFFFFFFF;
    int32_t top_k = 50;
    float top_p = 1.0f;
    std::vector<float> h_state;
    std::vector<float> pad_row;     // tts_pad's row, added to every fed-back frame
    std::vector<int32_t> codes;     // frame-major, n_codebooks per frame
    std::vector<uint8_t> committed; // code2wav state at frame `commit`
    int commit = 0;
    int emitted = 0;
    int wav_calls = 0;
    double t_decode = 0, t_code = 0;
};
