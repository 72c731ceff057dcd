// Fuzz target: encoding and decoding with the fixtures' real vocabularies (SentencePiece and the
// byte-level BPE pre-tokenizers), and every pre-tokenizer of the table on its own. Byte 0 picks
// the vocabulary (or, with flag 0x20, the pre-tokenizer), byte 1 the flags; the rest is the text
// to encode, or (flag 0x10) token ids to decode, 4 bytes each, any value.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/pretokenize.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode_text.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

std::vector<ls::Tokenizer>& vocabularies() {
    static std::vector<ls::Tokenizer> all;
    return all;
}

std::vector<ls::PreTokenizer>& pre_tokenizers() {
    static std::vector<ls::PreTokenizer> all;
    return all;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    const char* files[] = {
        "tokenizer/ggml-vocab-llama-spm.gguf", "tokenizer/ggml-vocab-llama-bpe.gguf",
        "tokenizer/ggml-vocab-qwen2.gguf",     "tokenizer/ggml-vocab-deepseek-llm.gguf",
        "tokenizer/ggml-vocab-gpt-2.gguf",     "tokenizer/ggml-vocab-phi-3.gguf",
        "models/stories260K.gguf",
    };
    for (const char* rel : files) {
        const std::string path = ls::fuzz::fixture_path(rel);
        if (path.empty()) continue;
        auto file = ls::GgufFile::open(path);
        if (!file) continue;
        auto tok = ls::Tokenizer::from_gguf(*file.value());
        if (!tok) {
            std::fprintf(stderr, "fuzz_tokenizer: %s: %s\n", rel, tok.error().message.c_str());
            std::abort();
        }
        vocabularies().push_back(std::move(tok.value()));
    }
    for (const std::string& name : ls::PreTokenizer::supported_names()) {
        auto pre = ls::PreTokenizer::for_name(name);
        if (!pre) {
            std::fprintf(stderr, "fuzz_tokenizer: pre-tokenizer %s: %s\n", name.c_str(), pre.error().message.c_str());
            std::abort();
        }
        pre_tokenizers().push_back(std::move(pre.value()));
    }
    if (vocabularies().empty()) {
        std::fprintf(stderr, "fuzz_tokenizer: no vocabulary found; it needs ../shared/fixtures "
                             "(or LAYERSCOPE_FIXTURES=DIR)\n");
        std::exit(1);
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 2) return 0;
    const ls::Tokenizer& tok = vocabularies()[data[0] % vocabularies().size()];
    const uint8_t flags = data[1];
    const bool add_special = flags & 1, parse_special = flags & 2;
    const bool remove_special = flags & 4, render_special = flags & 8;
    data += 2, size -= 2;
    if (flags & 0x20) {  // the words cover the text: as many code points in as out
        const ls::PreTokenizer& pre = pre_tokenizers()[data[-2] % pre_tokenizers().size()];
        const std::string_view text(reinterpret_cast<const char*>(data), size);
        if (pre.byte_encode()) {
            (void)pre.words(text);
            return 0;
        }
        size_t n = 0;
        for (const std::string& w : pre.words(text)) n += ls::unicode::decode_utf8(w).size();
        if (n != ls::unicode::decode_utf8(text).size()) std::abort();
        return 0;
    }
    if (flags & 0x10) {
        std::vector<ls::TokenId> ids(size / 4);
        if (!ids.empty()) std::memcpy(ids.data(), data, ids.size() * 4);
        for (ls::TokenId id : ids) (void)tok.is_eog(id), (void)tok.is_control(id);
        (void)tok.decode(ids, remove_special, render_special);
        return 0;
    }
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const std::vector<ls::TokenId> ids = tok.encode(text, add_special, parse_special);
    for (ls::TokenId id : ids) {
        if (!tok.valid(id)) std::abort();  // encode gives only ids of the vocabulary
    }
    (void)tok.decode(ids, remove_special, render_special);
    return 0;
}
