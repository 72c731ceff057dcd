// layerscope tokenize: the token ids of a text, with llama-tokenize's flags so one can stand in
// for the other, plus --json (ids, pieces, byte offsets, special flags), --chat and --against
// (the first token where another engine's ids differ).
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <algorithm>
#include <sstream>

#include "app/commands.h"
#include "engine/gguf/gguf.h"
#include "engine/tokenizer/chat_jinja.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/token_diff.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/util/quote.h"

namespace ls::app {

namespace {

int fail(const Error& e) {
    std::fprintf(stderr, "layerscope tokenize: %s\n", e.message.c_str());
    return exit_code_for(e);
}

int usage(const std::string& message) {
    std::fprintf(stderr, "layerscope tokenize: %s\n", message.c_str());
    return kExitUsage;
}

// What llama.cpp's common args do to a prompt unless --no-escape: \n \r \t \' \" \\ and \xHH.
std::string process_escapes(const std::string& in) {
    std::string out;
    out.reserve(in.size());
    auto hex = [](char c) {
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    };
    for (size_t i = 0; i < in.size(); ++i) {
        if (in[i] != '\\' || i + 1 >= in.size()) {
            out.push_back(in[i]);
            continue;
        }
        const char e = in[++i];
        switch (e) {
            case 'n': out.push_back('\n'); break;
            case 'r': out.push_back('\r'); break;
            case 't': out.push_back('\t'); break;
            case '\'': out.push_back('\''); break;
            case '"': out.push_back('"'); break;
            case '\\': out.push_back('\\'); break;
            case 'x':
                if (i + 2 < in.size() && hex(in[i + 1]) >= 0 && hex(in[i + 2]) >= 0) {
                    out.push_back(static_cast<char>(hex(in[i + 1]) * 16 + hex(in[i + 2])));
                    i += 2;
                    break;
                }
                [[fallthrough]];
            default:
                out.push_back('\\');
                out.push_back(e);
        }
    }
    return out;
}

bool read_all(std::istream& in, std::string* out) {
    std::ostringstream ss;
    ss << in.rdbuf();
    *out = ss.str();
    return !in.bad();
}

// Byte offset of each token's piece in `text`, found by walking the text; -1 for tokens that add
// text the input does not have (BOS, the leading space SentencePiece adds) and for everything
// after the first piece that does not line up (a vocabulary that normalises the text).
std::vector<int64_t> piece_offsets(const Tokenizer& tok, const std::vector<TokenId>& ids, const std::string& text) {
    std::vector<int64_t> offsets(ids.size(), -1);
    size_t cursor = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
        std::string piece = tok.token_to_piece(ids[i], true);
        if (text.compare(cursor, piece.size(), piece) == 0) {
            offsets[i] = static_cast<int64_t>(cursor);
            cursor += piece.size();
            continue;
        }
        if (!piece.empty() && piece[0] == ' ' && text.compare(cursor, piece.size() - 1, piece, 1) == 0) {
            offsets[i] = static_cast<int64_t>(cursor);
            cursor += piece.size() - 1;
            continue;
        }
        const bool added = (ids[i] == tok.bos() || ids[i] == tok.eos()) && tok.is_control(ids[i]);
        if (!added) break;
    }
    return offsets;
}

}  // namespace

int run_tokenize(const TokenizeOptions& o) {
    const int sources = (o.use_stdin ? 1 : 0) + (!o.file.empty() ? 1 : 0) + (o.prompt_given ? 1 : 0);
    const bool chat = o.chat || !o.messages_file.empty();
    if (sources == 0 && o.messages_file.empty()) return usage("give the text with -p TEXT, -f FILE or --stdin (or --messages FILE)");
    if (!o.chat_template.empty() && !o.chat_template_file.empty()) {
        return usage("--chat-template and --chat-template-file: give one");
    }

    using Clock = std::chrono::steady_clock;
    const auto t_load = Clock::now();
    auto file = GgufFile::open(o.model_path);
    if (!file.ok()) return fail(file.error());
    auto loaded = Tokenizer::from_gguf(*file.value());
    if (!loaded.ok()) {
        Error e = loaded.error();
        e.message = o.model_path + ": " + e.message;
        return fail(e);
    }
    const Tokenizer& tok = loaded.value();

    // llama-tokenize's precedence: --stdin, then -f, then -p.
    std::string text;
    if (o.use_stdin) {
        if (!read_all(std::cin, &text)) return fail(make_error(ErrorCode::kBadInput, "could not read standard input"));
    } else if (!o.file.empty()) {
        std::ifstream in(o.file, std::ios::binary);
        if (!in) return fail(make_error(ErrorCode::kBadInput, o.file + ": cannot open for reading"));
        if (!read_all(in, &text)) return fail(make_error(ErrorCode::kBadInput, o.file + ": read error"));
    } else {
        text = o.prompt;
    }
    if (!o.no_escape) text = process_escapes(text);

    jinja::Value chat_kwargs;  // undefined unless given
    if (!o.chat_kwargs.empty()) {
        auto kw = jinja::from_json(o.chat_kwargs);
        if (!kw.ok() || !kw->is_object()) return usage("--chat-template-kwargs: not a JSON object: " + quote_text(o.chat_kwargs));
        chat_kwargs = kw.value();
    }
    if (chat) {
        ChatPromptInput input;
        input.family_name = o.chat_template;
        if (!o.messages_file.empty()) {
            std::string json;
            std::ifstream in(o.messages_file, std::ios::binary);
            if (!in || !read_all(in, &json)) return fail(make_error(ErrorCode::kBadInput, o.messages_file + ": cannot read"));
            auto parsed = jinja_chat_from_json(json);
            if (!parsed.ok()) return fail(make_error(ErrorCode::kBadInput, o.messages_file + ": " + parsed.error().message));
            input.messages = parsed->messages;
            input.tools = parsed->tools;
        }
        if (!o.chat_template_file.empty()) {
            std::ifstream in(o.chat_template_file, std::ios::binary);
            if (!in || !read_all(in, &input.template_source))
                return fail(make_error(ErrorCode::kBadInput, o.chat_template_file + ": cannot read"));
        }
        input.kwargs = chat_kwargs;
        input.tokenizer_adds_bos = !o.no_bos;
        Result<std::string> templated = chat_prompt(*file.value(), tok, text, input);  // what run --chat does, and more
        if (!templated.ok()) {
            Error e = templated.error();
            if (!o.chat_template_file.empty()) e.message = o.chat_template_file + ": " + e.message;
            else if (o.chat_template.empty()) e.message = o.model_path + ": " + e.message;
            return fail(e);
        }
        text = templated.value();
    }

    const auto t_encode = Clock::now();
    const std::vector<TokenId> ids = tok.encode(text, !o.no_bos, !o.no_parse_special);
    if (o.timing) {
        auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
        const double encode_ms = ms(Clock::now() - t_encode);
        std::fprintf(stderr, "load %.1f ms | encode %zu bytes -> %zu tokens in %.1f ms (%.2f MiB/s)\n",
                     ms(t_encode - t_load), text.size(), ids.size(), encode_ms,
                     text.size() / 1048576.0 / std::max(encode_ms / 1000.0, 1e-9));
    }

    std::vector<TokenId> theirs;
    bool compare = !o.against.empty();
    if (compare) {
        std::string list = o.against;
        std::ifstream in(o.against, std::ios::binary);
        if (in && !read_all(in, &list)) return fail(make_error(ErrorCode::kBadInput, o.against + ": read error"));
        auto parsed = parse_token_ids(list, in ? o.against : "--against");
        if (!parsed.ok()) return fail(parsed.error());
        theirs = std::move(parsed.value());
    }

    if (o.json) {
        nlohmann::json j;
        j["model"] = o.model_path;
        j["tokenizer"] = {{"model", tok.model_name()}, {"pre", tok.pre_name()}, {"n_vocab", tok.n_tokens()}};
        j["text"] = text;  // invalid UTF-8 is replaced when dumped
        const std::vector<int64_t> offsets = piece_offsets(tok, ids, text);
        nlohmann::json list = nlohmann::json::array();
        for (size_t i = 0; i < ids.size(); ++i) {
            nlohmann::json t;
            t["id"] = ids[i];
            t["piece"] = tok.token_to_piece(ids[i], true);
            t["offset"] = offsets[i] >= 0 ? nlohmann::json(offsets[i]) : nlohmann::json(nullptr);
            t["special"] = tok.is_control(ids[i]);
            list.push_back(std::move(t));
        }
        j["tokens"] = std::move(list);
        j["n_tokens"] = ids.size();
        std::puts(j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else if (o.ids) {
        std::string line = "[";
        for (size_t i = 0; i < ids.size(); ++i) line += (i ? ", " : "") + std::to_string(ids[i]);
        std::printf("%s]\n", line.c_str());
    } else if (!compare) {
        for (TokenId id : ids) std::printf("%6d -> '%s'\n", id, tok.token_to_piece(id, true).c_str());
    }
    if (o.show_count) std::printf("Total number of tokens: %zu\n", ids.size());
    if (!compare) return kExitOk;

    const TokenDiff diff = first_token_difference(ids, theirs);
    const size_t first = diff.first;
    if (diff.same) {
        std::printf("same %zu tokens\n", ids.size());
        return kExitOk;
    }
    std::printf("first difference at token %zu (of %zu here, %zu there):\n", first, ids.size(), theirs.size());
    auto show = [&](const char* who, const std::vector<TokenId>& list) {
        if (first < list.size()) {
            std::printf("  %-6s %6d %s\n", who, list[first], quote_text(token_text(tok, list[first])).c_str());
        } else {
            std::printf("  %-6s (ends here)\n", who);
        }
    };
    show("here", ids);
    show("there", theirs);
    const size_t from = first >= 4 ? first - 4 : 0;
    std::printf("  text before it: %s\n", quote_text(token_span_text(tok, ids, from, first)).c_str());
    std::printf("  here from it:   %s\n", quote_text(token_span_text(tok, ids, first, first + 4)).c_str());
    std::printf("  there from it:  %s\n", quote_text(token_span_text(tok, theirs, first, first + 4)).c_str());
    return kExitDiverged;
}

}  // namespace ls::app
