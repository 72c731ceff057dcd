// Fuzz target: the remote protocol's decoder. The input is a stream of frames as a client or a
// server would read it: each header is checked against the limit, each payload decoded as its
// type says (a file chunk decompressed within its bound, a snapshot delta applied as the client
// applies it), and every decoder is also given the whole input as one payload.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/remote/session_wire.h"
#include "engine/remote/wire.h"

namespace {

using namespace ls::remote;

void decode_as(MsgType type, std::string_view payload) {
    switch (type) {
        case MsgType::kHello: (void)decode_hello(payload); break;
        case MsgType::kWelcome: (void)decode_welcome(payload); break;
        case MsgType::kRefused: (void)decode_refused(payload); break;
        case MsgType::kExec: (void)decode_exec(payload); break;
        case MsgType::kOutput: (void)decode_output(payload); break;
        case MsgType::kFileBegin: (void)decode_file_begin(payload); break;
        case MsgType::kFileChunk: {
            auto chunk = decode_file_chunk(payload);
            if (chunk) (void)decompress_chunk(chunk.value().compressed, kChunkBytes);
            break;
        }
        case MsgType::kExit: (void)decode_exit(payload); break;
        case MsgType::kOpen: (void)decode_open(payload); break;
        case MsgType::kOpened: (void)decode_opened(payload); break;
        case MsgType::kAttach: (void)decode_attach(payload); break;
        case MsgType::kCommand: (void)decode_command(payload); break;
        case MsgType::kCommandDone: (void)decode_command_done(payload); break;
        case MsgType::kFetch: (void)decode_fetch(payload); break;
        case MsgType::kTensor: (void)decode_tensor_header(payload); break;
        case MsgType::kDiagnose: (void)decode_diagnose(payload); break;
        case MsgType::kDiagnosis: (void)decode_diagnosis(payload); break;
        case MsgType::kUpload: (void)decode_upload(payload); break;
        case MsgType::kLens: (void)decode_lens(payload); break;
        case MsgType::kLensResult: (void)decode_lens_result(payload); break;
        case MsgType::kFetchWeight: (void)decode_fetch_weight(payload); break;
        case MsgType::kWeight: (void)decode_weight_header(payload); break;
        case MsgType::kSnapshot: {
            // As the client applies them: on nothing, then on the first one it accepted.
            (void)apply_snapshot_delta(payload, nullptr);
            auto first = decode_snapshot_delta(payload, nullptr);
            if (first) (void)decode_snapshot_delta(payload, first.value());
            break;
        }
        case MsgType::kFileEnd:
        case MsgType::kPing: break;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view all(reinterpret_cast<const char*>(data), size);
    for (uint8_t t = 1; t <= kLastMsgType; ++t) decode_as(static_cast<MsgType>(t), all);
    (void)decompress_chunk(all, kChunkBytes);
    size_t at = 0;
    bool first = true;
    while (size - at >= kHeaderBytes) {
        auto header = parse_frame_header(data + at, first ? kMaxHelloBytes : kMaxFrameBytes);
        if (!header) break;
        at += kHeaderBytes;
        if (size - at < header.value().length) break;
        decode_as(header.value().type, all.substr(at, header.value().length));
        at += header.value().length;
        first = false;
    }
    return 0;
}
