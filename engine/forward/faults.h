// The fault catalogue: classic inference-engine bugs that can be injected into our forward pass,
// so that the comparison shows how each one looks and the doctor learns to name it.
#pragma once

#include <string>
#include <vector>

namespace ls {

enum class Fault {
    kNone,
    kTransposedWeight,     // one projection (wq) used transposed: cuBLAS OP_T vs OP_N, wrong lda
    kRopeWrongPairing,     // NORM (adjacent pairs) <-> NEOX (halves)
    kRopeSkipped,          // Q and K not rotated
    kRopePositionOffByOne, // rotated for position p + 1
    kKvPositionStuck,      // every decode call writes the KV cache and ropes from position 0
    kAttentionScale,       // scores scaled by 1/d instead of 1/sqrt(d) (deepseek2: 1/sqrt(d) instead of mscale^2/sqrt(d))
    kYarnMscale,           // YaRN magnitude correction applied to cos/sin as well as the scale (double mscale)
    kNoCausalMask,         // tokens attend to later tokens
    kPaddedVocabArgmax,    // logits buffer larger than the vocabulary, argmax over uninitialized rows
    kQkvBiasDropped,       // attention q/k/v biases not added (qwen2)
    kRmsNormWeightTwice,   // RMSNorm weight multiplied twice
    kRmsNormEpsilon,       // RMSNorm epsilon 1000x too large
    kQ4KScaleMinSwapped,   // Q4_K 6-bit scales and mins unpacked in swapped roles
};

struct FaultInfo {
    Fault fault;
    const char* name;         // CLI name, e.g. "rope-pairing"
    const char* description;  // what the bug is, in the words of the people who hit it
    const char* first_event;  // where it first shows, as a pattern: "Qcur-0#3" ("{L}" none)
};

const std::vector<FaultInfo>& fault_catalogue();
const FaultInfo& fault_info(Fault fault);
bool fault_from_name(const std::string& name, Fault* out);
std::string fault_names();  // "transposed-weight, rope-pairing, ..."

// Rewrites Q4_K blocks so that ggml's unpacking reads each sub-block's scale as its min and the
// min as its scale: the bytes a decoder with the two roles swapped would effectively use.
void swap_q4k_scales_and_mins(void* blocks, int64_t n_blocks);

}  // namespace ls
