#include "engine/remote/session_wire.h"

#include <fmt/format.h>

namespace ls::remote {
namespace {

inline constexpr size_t kMaxDeltaBytes = 512u << 20;  // a delta, decompressed
inline constexpr size_t kMaxVector = 1u << 24;         // tokens, norms, top logits, ...

void put_ids(PayloadWriter& w, const std::vector<int32_t>& ids) {
    w.u32(static_cast<uint32_t>(ids.size()));
    for (int32_t id : ids) w.i32(id);
}
std::vector<int32_t> get_ids(PayloadReader& r) {
    std::vector<int32_t> ids(r.count(kMaxVector, 4));
    for (int32_t& id : ids) id = r.i32();
    return ids;
}
void put_strings(PayloadWriter& w, const std::vector<std::string>& v) {
    w.u32(static_cast<uint32_t>(v.size()));
    for (const std::string& s : v) w.str(s);
}
std::vector<std::string> get_strings(PayloadReader& r) {
    const size_t n = r.count(kMaxVector, 4);
    std::vector<std::string> v;
    v.reserve(n);
    for (size_t i = 0; i < n && r.ok(); ++i) v.push_back(r.str());
    return v;
}

void put_spec(PayloadWriter& w, const BreakpointSpec& b) {
    w.u8(static_cast<uint8_t>(b.kind));
    w.str(b.pattern);
    w.f64(b.threshold);
}
BreakpointSpec get_spec(PayloadReader& r) {
    BreakpointSpec b;
    const uint8_t kind = r.u8();
    if (kind > static_cast<uint8_t>(BreakpointKind::kDivergenceAbove)) r.fail();
    b.kind = static_cast<BreakpointKind>(kind);
    b.pattern = r.str();
    b.threshold = r.f64();
    return b;
}

void put_info(PayloadWriter& w, const EventInfo& e) {
    w.i64(e.index);
    w.str(e.name);
    w.str(e.base_name);
    w.i32(e.occurrence);
    w.i32(e.layer);
    w.u8(static_cast<uint8_t>(e.op));
    for (int64_t n : e.ne) w.i64(n);
    w.i32(e.decode);
    w.i32(e.ubatch);
}
EventInfo get_info(PayloadReader& r) {
    EventInfo e;
    e.index = r.i64();
    e.name = r.str(1024);
    e.base_name = r.str(1024);
    e.occurrence = r.i32();
    e.layer = r.i32();
    const uint8_t op = r.u8();
    if (op >= static_cast<uint8_t>(Op::kCount)) r.fail();
    e.op = static_cast<Op>(op);
    for (int64_t& n : e.ne) {
        n = r.i64();
        if (n < 0) r.fail();
    }
    e.decode = r.i32();
    e.ubatch = r.i32();
    return e;
}

void put_stats(PayloadWriter& w, const TensorStats& s) {
    w.i64(s.count);
    w.i64(s.nan_count);
    w.i64(s.inf_count);
    w.f32(s.min);
    w.f32(s.max);
    w.f64(s.mean);
    w.f64(s.rms);
    w.f32(s.hist_scale);
    for (int64_t h : s.hist) w.i64(h);
}
TensorStats get_stats(PayloadReader& r) {
    TensorStats s;
    s.count = r.i64();
    s.nan_count = r.i64();
    s.inf_count = r.i64();
    s.min = r.f32();
    s.max = r.f32();
    s.mean = r.f64();
    s.rms = r.f64();
    s.hist_scale = r.f32();
    for (int64_t& h : s.hist) h = r.i64();
    return s;
}

void put_comparison(PayloadWriter& w, const EventComparison& c) {
    w.i64(c.event_index);
    w.str(c.name);
    w.str(c.ref_name);
    w.str(c.source_name);
    w.str(c.ref_source_name);
    w.u8(static_cast<uint8_t>(c.status));
    const Metrics& m = c.metrics;
    for (int64_t v : {m.n, m.n_nonfinite, m.n_finite, m.nan_ours, m.inf_ours, m.nan_ref, m.inf_ref}) w.i64(v);
    for (double v : {m.max_abs, m.mean_abs, m.rel_l2, m.nmse, m.cosine, m.pearson}) w.f64(v);
    w.u8(c.partial);
    w.f64(c.sum_rel_error);
    w.str(c.note);
    w.i32(c.top_k_overlap);
    w.i32(c.ref_top1_rank);
    w.f64(c.floor_nmse);
    w.u8(static_cast<uint8_t>(c.local_origin));
    w.f64(c.local_nmse);
    w.str(c.local_why);
    w.str(c.local_weight);
}
EventComparison get_comparison(PayloadReader& r) {
    EventComparison c;
    c.event_index = r.i64();
    c.name = r.str();
    c.ref_name = r.str();
    c.source_name = r.str();
    c.ref_source_name = r.str();
    const uint8_t status = r.u8();
    if (status > static_cast<uint8_t>(CompareStatus::kUnusable)) r.fail();
    c.status = static_cast<CompareStatus>(status);
    Metrics& m = c.metrics;
    for (int64_t* v : {&m.n, &m.n_nonfinite, &m.n_finite, &m.nan_ours, &m.inf_ours, &m.nan_ref, &m.inf_ref}) *v = r.i64();
    for (double* v : {&m.max_abs, &m.mean_abs, &m.rel_l2, &m.nmse, &m.cosine, &m.pearson}) *v = r.f64();
    c.partial = r.u8() != 0;
    c.sum_rel_error = r.f64();
    c.note = r.str();
    c.top_k_overlap = r.i32();
    c.ref_top1_rank = r.i32();
    c.floor_nmse = r.f64();
    const uint8_t origin = r.u8();
    if (origin > static_cast<uint8_t>(LocalOrigin::kInherited)) r.fail();
    c.local_origin = static_cast<LocalOrigin>(origin);
    c.local_nmse = r.f64();
    c.local_why = r.str();
    c.local_weight = r.str();
    return c;
}

void put_norms(PayloadWriter& w, const HeadNorms* h) {
    w.u8(h != nullptr);
    if (!h) return;
    w.i32(h->layer);
    w.i32(h->decode);
    w.i32(h->ubatch);
    w.u8(h->is_key);
    w.u8(h->rope_part);
    w.i64(h->n_head);
    w.i64(h->n_pos);
    w.u32(static_cast<uint32_t>(h->norms.size()));
    for (float v : h->norms) w.f32(v);
}
std::shared_ptr<const HeadNorms> get_norms(PayloadReader& r) {
    if (r.u8() == 0) return nullptr;
    auto h = std::make_shared<HeadNorms>();
    h->layer = r.i32();
    h->decode = r.i32();
    h->ubatch = r.i32();
    h->is_key = r.u8() != 0;
    h->rope_part = r.u8() != 0;
    h->n_head = r.i64();
    h->n_pos = r.i64();
    h->norms.resize(r.count(kMaxVector, 4));
    for (float& v : h->norms) v = r.f32();
    // at() indexes head * n_pos + t: the sizes must agree.
    if (h->n_head < 0 || h->n_pos < 0 || (h->n_pos > 0 && h->n_head > static_cast<int64_t>(kMaxVector) / h->n_pos) ||
        static_cast<size_t>(h->n_head * h->n_pos) != h->norms.size())
        r.fail();
    return h;
}

void put_logits(PayloadWriter& w, const TopLogits* t) {
    w.u8(t != nullptr);
    if (!t) return;
    w.i32(t->decode);
    w.u8(t->has_reference);
    w.u32(static_cast<uint32_t>(t->entries.size()));
    for (const TopLogit& e : t->entries) {
        w.i32(e.token);
        w.str(e.piece);
        w.f32(e.logit);
        w.f32(e.prob);
        w.i32(e.ref_rank);
        w.f32(e.ref_prob);
    }
}
std::shared_ptr<const TopLogits> get_logits(PayloadReader& r) {
    if (r.u8() == 0) return nullptr;
    auto t = std::make_shared<TopLogits>();
    t->decode = r.i32();
    t->has_reference = r.u8() != 0;
    const size_t n = r.count(kMaxVector, 24);
    t->entries.resize(n);
    for (TopLogit& e : t->entries) {
        e.token = r.i32();
        e.piece = r.str();
        e.logit = r.f32();
        e.prob = r.f32();
        e.ref_rank = r.i32();
        e.ref_prob = r.f32();
    }
    return t;
}

}  // namespace

std::string encode(const Open& m) {
    PayloadWriter w;
    w.str(m.model);
    w.str(m.backend);
    w.str(m.mode);
    w.str(m.prompt);
    put_ids(w, m.tokens);
    w.i32(m.n_generate);
    w.str(m.reference);
    w.u64(m.capture_budget);
    return w.take();
}
Result<Open> decode_open(std::string_view payload) {
    PayloadReader r(payload);
    Open m;
    m.model = r.str(4096);
    m.backend = r.str(64);
    m.mode = r.str(64);
    m.prompt = r.str();
    m.tokens = get_ids(r);
    m.n_generate = r.i32();
    if (m.n_generate < 0 || m.n_generate > (1 << 20)) r.fail();
    m.reference = r.str(4096);
    m.capture_budget = r.u64();
    return finish_message(r, std::move(m), "open");
}
std::string encode(const Opened& m) {
    PayloadWriter w;
    w.u64(m.session);
    w.str(m.model);
    w.str(m.backend);
    w.str(m.model_path);
    w.u64(m.file_bytes);
    w.u64(m.header_bytes);
    return w.take();
}
Result<Opened> decode_opened(std::string_view payload) {
    PayloadReader r(payload);
    Opened m;
    m.session = r.u64();
    m.model = r.str();
    m.backend = r.str();
    m.model_path = r.str();
    m.file_bytes = r.u64();
    m.header_bytes = r.u64();
    if (m.header_bytes > kMaxModelHeaderBytes || m.header_bytes > m.file_bytes) r.fail();
    return finish_message(r, std::move(m), "opened");
}
std::string encode(const Attach& m) {
    PayloadWriter w;
    w.u64(m.session);
    w.u8(m.have_header);
    return w.take();
}
Result<Attach> decode_attach(std::string_view payload) {
    PayloadReader r(payload);
    Attach m;
    m.session = r.u64();
    m.have_header = r.u8() != 0;
    return finish_message(r, std::move(m), "attach");
}
std::string encode(const Command& m) {
    PayloadWriter w;
    w.u8(static_cast<uint8_t>(m.kind));
    w.i64(m.arg);
    w.i64(m.arg2);
    w.str(m.text);
    put_ids(w, m.ids);
    put_spec(w, m.breakpoint);
    put_strings(w, m.names);
    return w.take();
}
Result<Command> decode_command(std::string_view payload) {
    PayloadReader r(payload);
    Command m;
    const uint8_t kind = r.u8();
    if (kind < 1 || kind > kLastCommandKind) r.fail();
    m.kind = static_cast<CommandKind>(kind);
    m.arg = r.i64();
    m.arg2 = r.i64();
    m.text = r.str();
    m.ids = get_ids(r);
    m.breakpoint = get_spec(r);
    m.names = get_strings(r);
    return finish_message(r, std::move(m), "command");
}
std::string encode(const CommandDone& m) {
    PayloadWriter w;
    w.u64(m.ticket);
    w.str(m.error);
    w.str(m.note);
    return w.take();
}
Result<CommandDone> decode_command_done(std::string_view payload) {
    PayloadReader r(payload);
    CommandDone m;
    m.ticket = r.u64();
    m.error = r.str();
    m.note = r.str();
    return finish_message(r, std::move(m), "command-done");
}
std::string encode(const Fetch& m) {
    PayloadWriter w;
    w.i64(m.index);
    return w.take();
}
Result<Fetch> decode_fetch(std::string_view payload) {
    PayloadReader r(payload);
    Fetch m;
    m.index = r.i64();
    return finish_message(r, std::move(m), "fetch");
}
std::string encode(const TensorHeader& m) {
    PayloadWriter w;
    w.i64(m.index);
    for (int64_t n : m.ne) w.i64(n);
    w.u64(m.bytes);
    w.str(m.error);
    return w.take();
}
Result<TensorHeader> decode_tensor_header(std::string_view payload) {
    PayloadReader r(payload);
    TensorHeader m;
    m.index = r.i64();
    for (int64_t& n : m.ne) {
        n = r.i64();
        if (n < 0) r.fail();
    }
    m.bytes = r.u64();
    m.error = r.str();
    if (r.ok() && m.error.empty()) {
        // The bytes are exactly the shape's floats, and at most 16 GiB.
        uint64_t count = 1;
        for (int64_t n : m.ne) count = n == 0 ? 0 : (count > (uint64_t{1} << 32) / static_cast<uint64_t>(n) ? UINT64_MAX : count * n);
        if (count == UINT64_MAX || count * 4 != m.bytes) r.fail();
    }
    return finish_message(r, std::move(m), "tensor");
}

std::string encode(const Diagnose& m) {
    PayloadWriter w;
    w.u64(m.request);
    w.i64(m.event);
    w.u8(m.stop);
    return w.take();
}
Result<Diagnose> decode_diagnose(std::string_view payload) {
    PayloadReader r(payload);
    Diagnose m;
    m.request = r.u64();
    m.event = r.i64();
    m.stop = r.u8() != 0;
    if (m.event < -1) r.fail();
    return finish_message(r, std::move(m), "diagnose");
}
std::string encode(const Diagnosis& m) {
    PayloadWriter w;
    w.u64(m.request);
    w.i64(m.event);
    w.u8(m.done);
    w.str(m.step);
    w.u64(m.tried);
    w.str(m.verdict);
    w.u8(m.has_local);
    w.u32(static_cast<uint32_t>(m.local.size()));
    for (const EventComparison& c : m.local) put_comparison(w, c);
    return w.take();
}
Result<Diagnosis> decode_diagnosis(std::string_view payload) {
    PayloadReader r(payload);
    Diagnosis m;
    m.request = r.u64();
    m.event = r.i64();
    m.done = r.u8() != 0;
    m.step = r.str();
    m.tried = r.u64();
    m.verdict = r.str();
    m.has_local = r.u8() != 0;
    const size_t n = r.count(kMaxPlanEvents, 64);
    for (size_t i = 0; i < n && r.ok(); ++i) {
        m.local.push_back(get_comparison(r));
        if (m.local.back().event_index < 0) r.fail();
    }
    return finish_message(r, std::move(m), "diagnosis");
}
std::string encode(const Upload& m) {
    PayloadWriter w;
    w.u64(m.session);
    w.str(m.name);
    w.u64(m.size);
    return w.take();
}
Result<Upload> decode_upload(std::string_view payload) {
    PayloadReader r(payload);
    Upload m;
    m.session = r.u64();
    m.name = r.str(4096);
    m.size = r.u64();
    if (r.ok() && !is_upload_name(m.name)) r.fail();
    return finish_message(r, std::move(m), "upload");
}

std::string encode(const FetchWeight& m) {
    PayloadWriter w;
    w.str(m.name);
    return w.take();
}
Result<FetchWeight> decode_fetch_weight(std::string_view payload) {
    PayloadReader r(payload);
    FetchWeight m;
    m.name = r.str(4096);
    return finish_message(r, std::move(m), "fetch-weight");
}
std::string encode(const WeightHeader& m) {
    PayloadWriter w;
    w.str(m.name);
    w.u64(m.bytes);
    w.str(m.error);
    return w.take();
}
Result<WeightHeader> decode_weight_header(std::string_view payload) {
    PayloadReader r(payload);
    WeightHeader m;
    m.name = r.str(4096);
    m.bytes = r.u64();
    m.error = r.str();
    return finish_message(r, std::move(m), "weight");
}

std::string encode(const Lens& m) {
    PayloadWriter w;
    w.u64(m.request);
    return w.take();
}
Result<Lens> decode_lens(std::string_view payload) {
    PayloadReader r(payload);
    Lens m;
    m.request = r.u64();
    return finish_message(r, std::move(m), "lens");
}

namespace {

void put_lens_tokens(PayloadWriter& w, const std::vector<LensToken>& tokens) {
    w.u32(static_cast<uint32_t>(tokens.size()));
    for (const LensToken& t : tokens) {
        w.i32(t.token);
        w.f64(t.p);
    }
}
std::vector<LensToken> get_lens_tokens(PayloadReader& r) {
    std::vector<LensToken> tokens(r.count(kMaxLensTop, 12));
    for (LensToken& t : tokens) {
        t.token = r.i32();
        t.p = r.f64();
        if (t.token < 0) r.fail();
    }
    return tokens;
}

}  // namespace

std::string encode(const LensResult& m) {
    PayloadWriter w;
    w.u64(m.request);
    w.str(m.lens.error);
    const LogitLens& lens = m.lens.lens;
    w.i32(lens.top_k);
    w.u32(static_cast<uint32_t>(lens.layers.size()));
    for (const LensLayer& layer : lens.layers) {
        w.i32(layer.layer);
        w.u32(static_cast<uint32_t>(layer.cells.size()));
        for (const LensCell& c : layer.cells) {
            w.i32(c.decode);
            w.i64(c.position);
            put_lens_tokens(w, c.ours);
            put_lens_tokens(w, c.reference);
            w.f64(c.kl);
        }
        w.i64(layer.kl.n);
        for (double v : {layer.kl.mean, layer.kl.median, layer.kl.p99, layer.kl.max, layer.kl.min, layer.kl.same_top1}) w.f64(v);
    }
    w.u32(static_cast<uint32_t>(lens.arrivals.size()));
    for (const LensArrival& a : lens.arrivals) {
        w.i32(a.decode);
        w.i64(a.position);
        for (int32_t v : {a.ours_final, a.reference_final, a.ours_layer, a.reference_layer}) w.i32(v);
    }
    w.i32(lens.first_divergent_layer);
    w.i32(lens.first_top1_change);
    w.str(lens.why);
    w.u32(static_cast<uint32_t>(m.lens.events.size()));
    for (const LensEvent& e : m.lens.events) {
        w.i32(e.layer);
        w.i32(e.decode);
        w.i64(e.position);
        w.i64(e.event);
    }
    return w.take();
}
Result<LensResult> decode_lens_result(std::string_view payload) {
    PayloadReader r(payload);
    LensResult m;
    m.request = r.u64();
    m.lens.error = r.str();
    LogitLens& lens = m.lens.lens;
    lens.top_k = r.i32();
    if (lens.top_k < 0 || lens.top_k > static_cast<int32_t>(kMaxLensTop)) r.fail();
    lens.layers.resize(r.count(kMaxLensLayers, 64));
    for (LensLayer& layer : lens.layers) {
        if (!r.ok()) break;
        layer.layer = r.i32();
        if (layer.layer < 0) r.fail();
        layer.cells.resize(r.count(kMaxPlanEvents, 28));
        for (LensCell& c : layer.cells) {
            if (!r.ok()) break;
            c.decode = r.i32();
            c.position = r.i64();
            c.ours = get_lens_tokens(r);
            c.reference = get_lens_tokens(r);
            c.kl = r.f64();
            if (c.decode < 0 || c.position < -1) r.fail();
        }
        layer.kl.n = r.i64();
        for (double* v : {&layer.kl.mean, &layer.kl.median, &layer.kl.p99, &layer.kl.max, &layer.kl.min, &layer.kl.same_top1})
            *v = r.f64();
        if (layer.kl.n < 0) r.fail();
    }
    lens.arrivals.resize(r.count(kMaxPlanEvents, 28));
    for (LensArrival& a : lens.arrivals) {
        if (!r.ok()) break;
        a.decode = r.i32();
        a.position = r.i64();
        for (int32_t* v : {&a.ours_final, &a.reference_final, &a.ours_layer, &a.reference_layer}) {
            *v = r.i32();
            if (*v < -1) r.fail();
        }
        if (a.decode < 0 || a.position < -1) r.fail();
    }
    lens.first_divergent_layer = r.i32();
    lens.first_top1_change = r.i32();
    lens.why = r.str();
    if (lens.first_divergent_layer < -1 || lens.first_top1_change < -1) r.fail();
    m.lens.events.resize(r.count(kMaxPlanEvents, 24));
    for (LensEvent& e : m.lens.events) {
        if (!r.ok()) break;
        e.layer = r.i32();
        e.decode = r.i32();
        e.position = r.i64();
        e.event = r.i64();
        if (e.layer < 0 || e.decode < 0 || e.position < -1 || e.event < 0) r.fail();
    }
    return finish_message(r, std::move(m), "lens result");
}

bool is_upload_name(const std::string& name) {
    if (name.empty() || name.size() > 255) return false;
    int parts = 1;
    bool part_start = true;
    for (char ch : name) {
        if (ch == '/') {
            if (part_start || ++parts > 2) return false;
            part_start = true;
            continue;
        }
        const bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                           ch == '-' || ch == '_';
        if (!plain || (part_start && ch == '.')) return false;
        part_start = false;
    }
    return !part_start;
}

std::string encode_snapshot_delta(const SessionSnapshot& snap, SentState& sent) {
    PayloadWriter w;
    w.u64(snap.version);
    w.u64(snap.completed_ticket);
    w.u64(snap.commands_replaced);
    w.u8(static_cast<uint8_t>(snap.state));
    w.u8(snap.error.has_value());
    if (snap.error) {
        w.u8(static_cast<uint8_t>(snap.error->code));
        w.str(snap.error->message);
    }
    w.str(snap.message);
    put_ids(w, snap.tokens);
    put_strings(w, snap.pieces);
    put_ids(w, snap.generated);
    put_ids(w, snap.decode_inputs);
    w.i32(snap.planned_decode_calls);
    w.i32(snap.decode_calls_done);
    w.i64(snap.position);
    w.i64(snap.cursor);
    w.u64(snap.capture_bytes);
    w.u64(snap.capture_budget);
    w.i64(snap.captures_evicted);
    w.u32(static_cast<uint32_t>(snap.breakpoints.size()));
    for (const Breakpoint& b : snap.breakpoints) {
        w.i32(b.id);
        put_spec(w, b.spec);
        w.u8(b.enabled);
        w.i32(b.hit_count);
    }
    w.u8(snap.hit.has_value());
    if (snap.hit) {
        w.i32(snap.hit->breakpoint_id);
        w.i64(snap.hit->event_index);
        w.str(snap.hit->event_name);
        w.str(snap.hit->reason);
    }
    w.u8(snap.has_reference);
    w.f64(snap.thresholds.warn_nmse);
    w.f64(snap.thresholds.diverged_nmse);
    w.i32(snap.thresholds.top_k);
    w.u8(snap.thresholds.noise_floor);
    w.str(snap.reference_build);
    w.i64(snap.first_divergent);

    // The plan, when it is not the one sent last (then every record is sent again).
    const void* plan = snap.events.get();
    const bool new_plan = plan != sent.plan;
    w.u8(new_plan);
    if (new_plan) {
        const size_t n = snap.events ? snap.events->size() : 0;
        w.u32(static_cast<uint32_t>(n));
        for (size_t i = 0; i < n; ++i) put_info(w, (*snap.events)[i]);
        sent.plan = plan;
        sent.records.clear();
    }
    // Records: how many there are, then those that changed.
    w.u32(static_cast<uint32_t>(snap.records.size()));
    sent.records.resize(snap.records.size());
    std::vector<size_t> changed;
    for (size_t i = 0; i < snap.records.size(); ++i) {
        const auto& rec = snap.records[i];
        const auto& was = sent.records[i];
        const bool same = rec && !was.owner_before(rec) && !rec.owner_before(was) && !was.expired();
        if (!same && rec) changed.push_back(i);
        sent.records[i] = rec;
    }
    w.u32(static_cast<uint32_t>(changed.size()));
    for (size_t i : changed) {
        const EventRecord& rec = *snap.records[i];
        w.i64(static_cast<int64_t>(i));
        put_stats(w, rec.stats);
        w.u8(rec.compared);
        if (rec.compared) put_comparison(w, rec.comparison);
        w.str(rec.ref_attention_note);
        put_norms(w, rec.head_norms.get());
        put_norms(w, rec.ref_head_norms.get());
        put_logits(w, rec.top_logits.get());
    }
    sent.version = snap.version;
    return compress_chunk(w.take());
}

Result<std::shared_ptr<SessionSnapshot>> apply_snapshot_delta(std::string_view compressed,
                                                              const std::shared_ptr<const SessionSnapshot>& base) {
    auto bytes = decompress_chunk(compressed, kMaxDeltaBytes);
    if (!bytes) return bytes.error();
    return decode_snapshot_delta(bytes.value(), base);
}

Result<std::shared_ptr<SessionSnapshot>> decode_snapshot_delta(std::string_view bytes,
                                                               const std::shared_ptr<const SessionSnapshot>& base) {
    PayloadReader r(bytes);
    auto snap = std::make_shared<SessionSnapshot>();
    SessionSnapshot& s = *snap;
    s.version = r.u64();
    s.completed_ticket = r.u64();
    s.commands_replaced = r.u64();
    const uint8_t state = r.u8();
    if (state > static_cast<uint8_t>(SessionState::kError)) r.fail();
    s.state = static_cast<SessionState>(state);
    if (r.u8() != 0) {
        Error e;
        e.code = static_cast<ErrorCode>(r.u8());
        e.message = r.str();
        s.error = e;
    }
    s.message = r.str();
    s.tokens = get_ids(r);
    s.pieces = get_strings(r);
    s.generated = get_ids(r);
    s.decode_inputs = get_ids(r);
    s.planned_decode_calls = r.i32();
    s.decode_calls_done = r.i32();
    s.position = r.i64();
    s.cursor = r.i64();
    s.capture_bytes = r.u64();
    s.capture_budget = r.u64();
    s.captures_evicted = r.i64();
    const size_t n_bp = r.count(4096, 20);
    for (size_t i = 0; i < n_bp && r.ok(); ++i) {
        Breakpoint b;
        b.id = r.i32();
        b.spec = get_spec(r);
        b.enabled = r.u8() != 0;
        b.hit_count = r.i32();
        s.breakpoints.push_back(b);
    }
    if (r.u8() != 0) {
        BreakpointHit h;
        h.breakpoint_id = r.i32();
        h.event_index = r.i64();
        h.event_name = r.str();
        h.reason = r.str();
        s.hit = h;
    }
    s.has_reference = r.u8() != 0;
    s.thresholds.warn_nmse = r.f64();
    s.thresholds.diverged_nmse = r.f64();
    s.thresholds.top_k = r.i32();
    s.thresholds.noise_floor = r.u8() != 0;
    s.reference_build = r.str();
    s.first_divergent = r.i64();
    if (!r.ok()) return make_error(ErrorCode::kBadInput, "a malformed snapshot message (its header)");

    const bool new_plan = r.u8() != 0;
    if (new_plan) {
        auto events = std::make_shared<std::vector<EventInfo>>(r.count(kMaxPlanEvents, 60));
        for (EventInfo& e : *events) e = get_info(r);
        s.events = std::move(events);
    } else {
        if (!base) return make_error(ErrorCode::kBadInput, "a snapshot message without the event plan it builds on");
        s.events = base->events;
    }
    const size_t n_events = s.events ? s.events->size() : 0;
    const size_t n_records = r.count(kMaxPlanEvents, 0);
    if (n_records > n_events) r.fail();
    s.records.resize(r.ok() ? n_records : 0);
    if (!new_plan && base)
        for (size_t i = 0; i < s.records.size() && i < base->records.size(); ++i) s.records[i] = base->records[i];
    const size_t n_changed = r.count(n_records, 8);
    for (size_t k = 0; k < n_changed && r.ok(); ++k) {
        const int64_t index = r.i64();
        if (index < 0 || static_cast<size_t>(index) >= n_records) {
            r.fail();
            break;
        }
        auto rec = std::make_shared<EventRecord>();
        rec->info = (*s.events)[static_cast<size_t>(index)];
        rec->stats = get_stats(r);
        rec->compared = r.u8() != 0;
        if (rec->compared) rec->comparison = get_comparison(r);
        rec->ref_attention_note = r.str();
        rec->head_norms = get_norms(r);
        rec->ref_head_norms = get_norms(r);
        rec->top_logits = get_logits(r);
        s.records[static_cast<size_t>(index)] = std::move(rec);
    }
    if (!r.ok() || !r.at_end()) return make_error(ErrorCode::kBadInput, "a malformed snapshot message (its records)");
    s.captures = std::make_shared<CaptureMap>();  // the client's fetched tensors are its own to add
    return snap;
}

}  // namespace ls::remote
