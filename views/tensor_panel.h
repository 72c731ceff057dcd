// Tensor inspector: the selected weight tensor's statistics and first values, dequantized once
// when the selection changes (not per frame), and the quant block inspector: one block of it as
// stored (scales, each element's code, level and value; engine/model/quant_block.h). A model that
// runs on a server has its tensor table here and its bytes there: the selected weight's bytes are
// fetched (once; the session keeps them) and decoded as a local file's.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/model/quant_block.h"
#include "views/model_document.h"
#include "views/remote_events.h"

namespace ls::views {

struct TensorPanel {
    bool open = true;

    // Decodes `name` from `doc` (small models only are instant; large tensors take a moment).
    void select(const std::shared_ptr<const ModelDocument>& doc, const std::string& name);
    void clear();
    // `doc`: the model document shown now; a selection made in another one (or in one since
    // closed, wherever a new one lies) is dropped.
    // `remote`: the server a weightless model's bytes are fetched from (null: a local model).
    void draw(const std::shared_ptr<const ModelDocument>& doc, RemoteEvents* remote = nullptr);
    // Shows block `block` of the selected tensor (clamped to its blocks); false without one.
    bool select_block(int64_t block);

    // What happened since the last call, for the log ("" when nothing): a weight fetched from the
    // server and decoded, or why not.
    std::string take_news() { return std::exchange(news_, std::string()); }

    // What the last frame drew (for tests).
    struct Shown {
        int64_t block = -1;        // the block shown, -1 for none
        std::string fields;        // its fields, "name value" lines
        int64_t elements = 0;      // rows of its element table
    } shown;

private:
    void draw_block();
    void decode(const GgufTensorInfo& tensor);  // values, statistics and the first block of `tensor` (its data here)
    // A weightless model's selection: asks `remote` for the bytes, then decodes them.
    void poll_remote(const ModelDocument& doc, RemoteEvents* remote);

    std::weak_ptr<const ModelDocument> doc_;  // the selection's document; never kept alive by the panel
    std::string name_;
    std::string description_;  // type and ne
    std::string error_;
    GgufTensorInfo info_;                       // the selection, its data in the file or in bytes_
    std::shared_ptr<const std::string> bytes_;  // a server's bytes of it
    bool awaiting_ = false, asked_ = false;     // its bytes are on the server: asked for yet?
    std::string news_;
    std::vector<float> values_;
    ValueStats stats_;
    int64_t n_blocks_ = 0, block_elements_ = 0;
    QuantBlock block_;
    std::string block_error_;
};

}  // namespace ls::views
