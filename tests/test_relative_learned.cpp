// The learned-table schemes (layers/relative_learned.h): score and value terms against explicit
// float64 double loops (π(i), δ and the policy computed here, independently of relative_index) over
// many shapes, alignments and policies; gradchecks of each term and of whole attention layers;
// translation invariance; garbage in masked positions; clear errors.
#include "layers/relative_learned.h"
#include "op_harness.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

// π(i), written out per alignment; kind 3 = explicit positions (also outside [0, t1)).
std::vector<int64_t> positions_for(int kind, int64_t t2, int64_t t1) {
  std::vector<int64_t> p(t2);
  for (int64_t i = 0; i < t2; ++i) {
    if (kind == 0) p[i] = i;
    else if (kind == 1) p[i] = i + t1 - t2;
    else if (kind == 2) p[i] = (i * t1) / t2;
    else p[i] = (i * 7 + 3) % (t1 + 4) - 2;
  }
  return p;
}

AttentionGeometry geometry(int kind, int64_t B, int64_t H, int64_t D, int64_t t2, int64_t t1, bool causal) {
  AttentionGeometry g = AttentionGeometry::make(B, H, D, t2, t1, causal);
  if (kind < 3) g.alignment = kind == 0 ? Alignment::Left : kind == 1 ? Alignment::Right : Alignment::Scaled;
  else g.query_positions = from_vector(positions_for(kind, t2, t1), {t2});
  return g;
}

// The table row for relative position δ, or −1 (no term); sets `error` when the Error policy hits.
int64_t row_for(int64_t delta, int64_t max_past, int64_t max_future, OutOfRange policy, bool causal, bool& error) {
  if (causal && delta > 0) return -1;
  if (delta >= -max_past && delta <= max_future) return delta + max_past;
  if (policy == OutOfRange::Clip) return delta < 0 ? 0 : max_past + max_future;
  if (policy == OutOfRange::Error) error = true;
  return -1;
}

struct Reference {
  Ref scores{Shape{}};  // (B,H,t2,t1): q_i · e_row
  Ref values{Shape{}};  // (B,H,t2,D): Σ_j w_ij e^V_row
  bool error = false;
};

// q (B,H,t2,D), w (B,H,t2,t1) or undefined, tables (R,D) or (H,R,D).
Reference reference(const Tensor& q, const Tensor& table, const Tensor& w, const Tensor& vtable,
                    const std::vector<int64_t>& pos, int64_t t1, int64_t max_past, int64_t max_future,
                    OutOfRange policy, bool causal) {
  Ref Q(q), E(table);
  const int64_t B = q.size(0), H = q.size(1), t2 = q.size(2), D = q.size(3);
  const bool per_head = table.dim() == 3;
  Reference r;
  r.scores = Ref(Shape{B, H, t2, t1});
  r.values = Ref(Shape{B, H, t2, D});
  Ref W = w.defined() ? Ref(w) : Ref(Shape{1});
  Ref EV = vtable.defined() ? Ref(vtable) : Ref(Shape{1});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < t2; ++i)
        for (int64_t j = 0; j < t1; ++j) {
          int64_t row = row_for(j - pos[i], max_past, max_future, policy, causal, r.error);
          if (row < 0) continue;
          double s = 0;
          for (int64_t d = 0; d < D; ++d)
            s += Q.at({b, h, i, d}) * (per_head ? E.at({h, row, d}) : E.at({row, d}));
          r.scores.at({b, h, i, j}) = s;
          if (!w.defined()) continue;
          for (int64_t d = 0; d < D; ++d)
            r.values.at({b, h, i, d}) += W.at({b, h, i, j}) * (per_head ? EV.at({h, row, d}) : EV.at({row, d}));
        }
  return r;
}

void set_table(Tensor& table, const Tensor& values) {
  NoGradGuard no_grad;
  table.copy_(values);
}

const std::vector<std::pair<int64_t, int64_t>> kLengths = {{4, 4}, {2, 6}, {6, 2}, {3, 3}, {7, 5}, {5, 9}, {1, 7}, {9, 9}};

}  // namespace

TEST_CASE("SeedRelativeEmbedding: score_term equals the double loop (all alignments, policies, heads)") {
  const int64_t B = 2, H = 2, D = 3;
  int checked = 0, errors = 0;
  for (int64_t t3 : {1, 4, 6})
    for (auto [t2, t1] : kLengths)
      for (int kind = 0; kind < 4; ++kind)
        for (OutOfRange policy : {OutOfRange::Zero, OutOfRange::Clip, OutOfRange::Error})
          for (int64_t heads : {int64_t(0), H})
            for (bool causal : {false, true}) {
              SeedRelativeEmbedding s(D, t3, heads, policy);
              s.to(kFloat64);
              Tensor q = uniform({B, H, t2, D}, -1, 1, kFloat64, 7 + t2 * 13 + t1);
              AttentionGeometry g = geometry(kind, B, H, D, t2, t1, causal);
              Reference r = reference(q, s.table, Tensor(), Tensor(), positions_for(kind, t2, t1), t1, t3 - 1, t3 - 1,
                                      policy, causal);
              if (r.error) {
                check_throws_with([&] { s.score_term(q, g); }, "outside the table's range");
                ++errors;
              } else {
                CHECK_CLOSE(s.score_term(q, g), r.scores.tensor(), 1e-12, 0);
                ++checked;
              }
            }
  CHECK(checked > 300);
  CHECK(errors > 20);
}

TEST_CASE("SeedRelativeEmbedding: t2 > t3 never mixes rows (the seed's TF recipe does)") {
  // t3 = 4, t2 = 5, t1 = 4, left alignment: TF's default diag_part puts q0·e0 at (1, 0); the right
  // answer there is q1·e−1, and query 4 at key 0 (δ = −4) is outside the table: 0 under Zero.
  const int64_t D = 2, t3 = 4;
  SeedRelativeEmbedding s(D, t3, 0, OutOfRange::Zero);
  s.to(kFloat64);
  Tensor q = uniform({1, 1, 5, D}, -1, 1, kFloat64, 3);
  Tensor S = s.score_term(q, geometry(0, 1, 1, D, 5, 4, false));
  Ref Q(q), E(s.table), Sr(S);
  auto dot = [&](int64_t i, int64_t delta) {
    return Q.at({0, 0, i, 0}) * E.at({delta + t3 - 1, 0}) + Q.at({0, 0, i, 1}) * E.at({delta + t3 - 1, 1});
  };
  CHECK(std::fabs(Sr.at({0, 0, 1, 0}) - dot(1, -1)) < 1e-12);
  CHECK(std::fabs(Sr.at({0, 0, 1, 0}) - dot(0, 0)) > 1e-6);  // what the TF recipe would put there
  CHECK(Sr.at({0, 0, 4, 0}) == 0.0);
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 4; ++j)
      if (j - i >= -(t3 - 1)) CHECK(std::fabs(Sr.at({0, 0, i, j}) - dot(i, j - i)) < 1e-12);
  // Under the Error policy the same lengths are a clear error.
  SeedRelativeEmbedding strict(D, t3, 0, OutOfRange::Error);
  check_throws_with([&] { strict.score_term(q.to(kFloat32), geometry(0, 1, 1, D, 5, 4, false)); },
                    "query 4 (position 4) and key 0 are at relative position -4");
}

TEST_CASE("SeedRelativeEmbedding: load_seed_table converts the seed's future-first columns") {
  const int64_t D = 2, t3 = 3, R = 5;
  SeedRelativeEmbedding s(D, t3, 0);
  std::vector<float> seed(D * R);
  for (int64_t d = 0; d < D; ++d)
    for (int64_t c = 0; c < R; ++c) seed[d * R + c] = float(10 * d + c);  // E_seed[d, c]
  s.load_seed_table(from_vector(seed, {D, R}));
  Ref E(s.table);
  for (int64_t delta = -(t3 - 1); delta <= t3 - 1; ++delta)
    for (int64_t d = 0; d < D; ++d)
      CHECK(E.at({delta + t3 - 1, d}) == seed[d * R + SeedRelativeEmbedding::seed_column(delta, t3)]);
  check_throws_with([&] { s.load_seed_table(zeros({R, D})); }, "load_seed_table expects the seed's layout");
}

TEST_CASE("HuangRelativeEmbedding: score_term equals the double loop (causal, all alignments and policies)") {
  const int64_t B = 2, H = 3, D = 2;
  int checked = 0;
  for (int64_t t3 : {1, 3, 5})
    for (auto [t2, t1] : kLengths)
      for (int kind = 0; kind < 4; ++kind)
        for (OutOfRange policy : {OutOfRange::Zero, OutOfRange::Clip, OutOfRange::Error})
          for (int64_t heads : {int64_t(0), H}) {
            HuangRelativeEmbedding s(D, t3, heads, policy);
            s.to(kFloat64);
            Tensor q = uniform({B, H, t2, D}, -1, 1, kFloat64, 11 + t1);
            AttentionGeometry g = geometry(kind, B, H, D, t2, t1, true);
            Reference r = reference(q, s.table, Tensor(), Tensor(), positions_for(kind, t2, t1), t1, t3 - 1, 0, policy,
                                    true);
            if (r.error) {
              check_throws_with([&] { s.score_term(q, g); }, "outside the table's range");
            } else {
              CHECK_CLOSE(s.score_term(q, g), r.scores.tensor(), 1e-12, 0);
              ++checked;
            }
          }
  CHECK(checked > 150);
}

TEST_CASE("HuangRelativeEmbedding equals the seed's method on the past half, in causal attention") {
  const int64_t D = 3, t3 = 5;
  SeedRelativeEmbedding seed(D, t3, 2, OutOfRange::Zero);
  HuangRelativeEmbedding huang(D, t3, 2, OutOfRange::Zero);
  seed.to(kFloat64);
  huang.to(kFloat64);
  set_table(huang.table, narrow(seed.table, 1, 0, t3));  // rows δ = −4 … 0
  Tensor q = uniform({2, 2, 7, D}, -1, 1, kFloat64, 5);
  for (int kind = 0; kind < 4; ++kind) {
    AttentionGeometry g = geometry(kind, 2, 2, D, 7, 7, true);
    CHECK_CLOSE(huang.score_term(q, g), seed.score_term(q, g), 1e-12, 0);
  }
}

TEST_CASE("ShawRelativeEmbedding: score and value terms equal the double loop (clip, all alignments, heads)") {
  const int64_t B = 2, H = 2, D = 3;
  int checked = 0;
  for (int64_t k : {0, 1, 3})
    for (auto [t2, t1] : kLengths)
      for (int kind = 0; kind < 4; ++kind)
        for (int64_t heads : {int64_t(0), H})
          for (bool causal : {false, true}) {
            ShawRelativeEmbedding s(D, k, heads, true);
            s.to(kFloat64);
            Tensor q = uniform({B, H, t2, D}, -1, 1, kFloat64, 17 + t2);
            Tensor w = uniform({B, H, t2, t1}, 0, 1, kFloat64, 19 + t1);
            AttentionGeometry g = geometry(kind, B, H, D, t2, t1, causal);
            Reference r = reference(q, s.key_table, w, s.value_table, positions_for(kind, t2, t1), t1, k, k,
                                    OutOfRange::Clip, causal);
            CHECK_CLOSE(s.score_term(q, g), r.scores.tensor(), 1e-12, 0);
            CHECK_CLOSE(s.value_term(w, g), r.values.tensor(), 1e-12, 0);
            ++checked;
          }
  CHECK(checked == 3 * 8 * 4 * 2 * 2);
  ShawRelativeEmbedding keys_only(D, 2, 0, false);
  CHECK(!keys_only.value_term(ones({1, 1, 2, 2}), geometry(0, 1, 1, D, 2, 2, false)).defined());
  CHECK(keys_only.named_parameters().size() == 1);
}

TEST_CASE("learned relative schemes: float64 gradcheck of each term w.r.t. q and the tables") {
  const int64_t B = 1, H = 2, D = 2, t2 = 3, t1 = 4;
  for (int64_t heads : {int64_t(0), H})
    for (int kind = 0; kind < 4; ++kind) {
      Tensor q = uniform({B, H, t2, D}, -1, 1, kFloat64, 2).requires_grad_();
      Tensor w = uniform({B, H, t2, t1}, 0, 1, kFloat64, 3).requires_grad_();
      SeedRelativeEmbedding seed(D, 3, heads, OutOfRange::Clip);
      HuangRelativeEmbedding huang(D, 3, heads, OutOfRange::Zero);
      ShawRelativeEmbedding shaw(D, 1, heads, true);
      for (Module* m : std::initializer_list<Module*>{&seed, &huang, &shaw}) m->to(kFloat64);
      AttentionGeometry g = geometry(kind, B, H, D, t2, t1, false), gc = geometry(kind, B, H, D, t2, t1, true);
      // The lambdas point the scheme at gradcheck's copy of the table for the call.
      auto with_table = [](Tensor& member, const Tensor& t, auto fn) {
        Tensor saved = member;
        member = t;
        Tensor out = fn();
        member = saved;
        return out;
      };
      GradcheckResult r1 = gradcheck([&](const TensorList& in) {
        return with_table(seed.table, in[1], [&] { return seed.score_term(in[0], g); });
      }, {q, seed.table});
      CHECK_MESSAGE(r1.ok, "seed: " << r1.message);
      GradcheckResult r2 = gradcheck([&](const TensorList& in) {
        return with_table(huang.table, in[1], [&] { return huang.score_term(in[0], gc); });
      }, {q, huang.table});
      CHECK_MESSAGE(r2.ok, "huang: " << r2.message);
      GradcheckResult r3 = gradcheck([&](const TensorList& in) {
        return with_table(shaw.key_table, in[1], [&] { return shaw.score_term(in[0], g); });
      }, {q, shaw.key_table});
      CHECK_MESSAGE(r3.ok, "shaw keys: " << r3.message);
      GradcheckResult r4 = gradcheck([&](const TensorList& in) {
        return with_table(shaw.value_table, in[1], [&] { return shaw.value_term(in[0], kind % 2 ? gc : g); });
      }, {w, shaw.value_table});
      CHECK_MESSAGE(r4.ok, "shaw values: " << r4.message);
    }
}

namespace {

std::shared_ptr<PositionalScheme> make_scheme(int which, int64_t D, int64_t heads, Generator* gen) {
  if (which == 0) return std::make_shared<SeedRelativeEmbedding>(D, 3, heads, OutOfRange::Zero, gen);
  if (which == 1) return std::make_shared<HuangRelativeEmbedding>(D, 3, heads, OutOfRange::Clip, gen);
  return std::make_shared<ShawRelativeEmbedding>(D, 1, heads, true, gen);
}

Tensor& first_table(PositionalScheme& s) {
  if (auto* p = dynamic_cast<SeedRelativeEmbedding*>(&s)) return p->table;
  if (auto* p = dynamic_cast<HuangRelativeEmbedding*>(&s)) return p->table;
  return dynamic_cast<ShawRelativeEmbedding&>(s).value_table;
}

}  // namespace

TEST_CASE("learned relative schemes: float64 gradcheck of a whole MultiHeadAttention (self causal, cross masked)") {
  const int64_t B = 2, C = 4, H = 2, D = 2;
  for (int which = 0; which < 3; ++which)
    for (int64_t heads : {int64_t(0), H}) {
      Generator gen(40 + which);
      auto scheme = make_scheme(which, D, heads, &gen);
      MultiHeadAttention mha(C, H, scheme, 0.0, true, &gen);
      mha.to(kFloat64);
      Tensor x = uniform({B, 3, C}, -1, 1, kFloat64, 5).requires_grad_();
      AttentionOptions self;
      self.causal = true;
      GradcheckResult r = gradcheck([&](const TensorList& in) { return mha.forward(in[0], in[0], self).output; }, {x});
      CHECK_MESSAGE(r.ok, mha.positional->name() << " self: " << r.message);
      Tensor& table = first_table(*scheme);
      GradcheckResult rt = gradcheck([&](const TensorList& in) {
        Tensor saved = table;
        table = in[0];
        Tensor out = mha.forward(x.detach(), x.detach(), self).output;
        table = saved;
        return out;
      }, {table});
      CHECK_MESSAGE(rt.ok, mha.positional->name() << " table: " << rt.message);
      if (which == 1) continue;  // Huang is causal self-attention only
      Tensor kv = uniform({B, 5, C}, -1, 1, kFloat64, 6).requires_grad_();
      AttentionOptions cross;
      cross.key_padding_mask = from_vector<bool>({false, false, false, true, true, false, false, false, false, true},
                                                 {B, 5});
      cross.alignment = Alignment::Scaled;
      GradcheckResult rc = gradcheck([&](const TensorList& in) { return mha.forward(in[0], in[1], cross).output; },
                                     {x, kv});
      CHECK_MESSAGE(rc.ok, mha.positional->name() << " cross: " << rc.message);
    }
}

TEST_CASE("learned relative schemes: translation invariance (shifted positions, prefix-padded sequences)") {
  const int64_t B = 1, C = 4, H = 2, D = 2, T = 5, pad = 3;
  for (int which = 0; which < 3; ++which) {
    Generator gen(60 + which);
    auto scheme = make_scheme(which, D, H, &gen);
    scheme->to(kFloat64);
    // score_term: 3 more keys in front and every query 3 positions later → the same scores on the old keys.
    Tensor q = uniform({B, H, T, D}, -1, 1, kFloat64, 8);
    AttentionGeometry g = geometry(0, B, H, D, T, T, true);
    AttentionGeometry shifted = geometry(0, B, H, D, T, T + pad, true);
    shifted.query_positions = add(arange(double(T), kInt64), double(pad)).to(kInt64);
    CHECK_CLOSE(narrow(scheme->score_term(q, shifted), 3, pad, T), scheme->score_term(q, g), 1e-12, 0);
    // A whole causal layer on a prefix-padded sequence: rows after the padding are unchanged.
    MultiHeadAttention mha(C, H, scheme, 0.0, true, &gen);
    mha.to(kFloat64);
    Tensor x = uniform({B, T, C}, -1, 1, kFloat64, 9);
    Tensor padded = cat({uniform({B, pad, C}, -5, 5, kFloat64, 10), x}, 1);
    AttentionOptions plain, masked;
    plain.causal = masked.causal = true;
    std::vector<bool> kpm(T + pad, false);
    for (int64_t j = 0; j < pad; ++j) kpm[j] = true;
    masked.key_padding_mask = from_vector<bool>(kpm, {B, T + pad});
    CHECK_CLOSE(narrow(mha.forward(padded, padded, masked).output, 1, pad, T), mha.forward(x, x, plain).output, 1e-12,
                1e-10);
  }
}

TEST_CASE("learned relative schemes: garbage in masked (future) table rows changes no output or gradient") {
  const int64_t B = 2, C = 4, H = 2, D = 2, T = 4, t3 = 4;
  Tensor x = uniform({B, T, C}, -1, 1, kFloat64, 12);
  Tensor probe = uniform({B, T, C}, -1, 1, kFloat64, 13);
  auto run = [&](bool garbage) {
    Generator gen(77);
    auto scheme = std::make_shared<SeedRelativeEmbedding>(D, t3, H, OutOfRange::Zero, &gen);
    MultiHeadAttention mha(C, H, scheme, 0.0, true, &gen);
    mha.to(kFloat64);
    if (garbage) {  // rows δ = 1 … t3 − 1: only ever reached by masked (future) keys
      NoGradGuard no_grad;
      narrow(scheme->table, 1, t3, t3 - 1).fill_(1e6);
    }
    Tensor xi = x.detach().clone().requires_grad_();
    AttentionOptions o;
    o.causal = true;
    Tensor out = mha.forward(xi, xi, o).output;
    sum(mul(out, probe)).backward();
    return std::vector<Tensor>{out.detach(), xi.grad(), mha.q_proj->weight.grad(), narrow(scheme->table.grad(), 1, 0, t3),
                               narrow(scheme->table.grad(), 1, t3, t3 - 1)};
  };
  std::vector<Tensor> clean = run(false), dirty = run(true);
  for (size_t k = 0; k < clean.size(); ++k) CHECK_CLOSE(dirty[k], clean[k], 0, 0);
  CHECK_CLOSE(dirty[4], zeros(dirty[4].shape(), kFloat64), 0, 0);  // future rows get no gradient
}

TEST_CASE("learned relative schemes: bad input gives a clear error") {
  SeedRelativeEmbedding seed(4, 3, 2);
  HuangRelativeEmbedding huang(4, 3, 0);
  ShawRelativeEmbedding shaw(4, 2, 0, true);
  AttentionGeometry g = geometry(0, 1, 2, 4, 3, 3, false);
  check_throws_with([&] { seed.score_term(zeros({1, 2, 3, 5}), g); },
                    "[SeedRelativeEmbedding] q must be (B, H, t2, 4) to match the table");
  check_throws_with([&] { seed.score_term(zeros({1, 3, 3, 4}), g); }, "has 3 heads but the per-head table");
  check_throws_with([&] { huang.score_term(zeros({1, 2, 3, 4}), g); }, "[HuangRelativeEmbedding] needs causal");
  check_throws_with([&] { shaw.score_term(zeros({1, 2, 3, 3}), g); }, "[ShawRelativeEmbedding] q must be");
  check_throws_with([&] { shaw.value_term(zeros({1, 2, 3, 4, 1}), g); }, "[ShawRelativeEmbedding] weights must be");
  check_throws_with([&] { shaw.value_term(zeros({1, 2, 3, 5}), g); }, "weights must be (B, H, t2, 3)");
  check_throws_with([&] { seed.score_term(zeros({1, 2, 2, 4}), g); }, "the geometry says t2 = 3");
  // The table too short under the Error policy: relative_index's message names the pair.
  SeedRelativeEmbedding strict(4, 2, 0, OutOfRange::Error);
  check_throws_with([&] { strict.score_term(zeros({1, 2, 3, 4}), g); }, "[relative_index] query 0 (position 0)");
  check_throws_with([] { SeedRelativeEmbedding(0, 3); }, "[SeedRelativeEmbedding] head_dim must be > 0");
  check_throws_with([] { HuangRelativeEmbedding(4, 0); }, "[HuangRelativeEmbedding] max_length (t3) must be > 0");
  check_throws_with([] { ShawRelativeEmbedding(4, -1); }, "[ShawRelativeEmbedding] clip distance k must be >= 0");
  // Through the attention layer: a head-size mismatch between the layer and the scheme.
  MultiHeadAttention mha(8, 2, std::make_shared<ShawRelativeEmbedding>(3, 2));
  check_throws_with([&] { mha.forward(zeros({1, 3, 8}), zeros({1, 3, 8})); },
                    "[ShawRelativeEmbedding] q must be (B, H, t2, 3)");
}
