// The samples each data source prints after training (train/data/dataset.h).
#include "train/data/dataset.h"

#include <algorithm>
#include <ostream>

namespace relgrad {

namespace {

// periodic_lm: the model continues BOS and one period of a held-out pattern; the rest should repeat it.
void print_periodic_samples(const SyntheticTask& task, SampleModel& model, int64_t count, std::ostream& out) {
  const int64_t n = std::min<int64_t>(count, task.config().batch_size);
  out << "greedy continuations of one period of held-out patterns:\n";
  int64_t exact = 0;
  for (int64_t row = 0; row < n; ++row) {
    const SyntheticTask::Sample c = task.held_out_case(row);
    std::vector<int64_t> prompt{kBos};
    prompt.insert(prompt.end(), c.source.begin(), c.source.end());
    std::vector<int64_t> got = model.continue_prompt(prompt, false);
    const std::vector<int64_t>& wanted = c.target;
    got.erase(got.begin(), got.begin() + std::min(got.size(), prompt.size()));
    if (got.size() > wanted.size()) got.resize(wanted.size());
    const bool ok = got == std::vector<int64_t>(wanted.begin(), wanted.begin() + got.size()) && !got.empty();
    exact += ok;
    out << "  prompt " << task.vocab().decode(prompt) << "\n  target " << task.vocab().decode(wanted)
        << "\n  model  " << task.vocab().decode(got) << (ok ? "   (exact)" : "   (differs)") << "\n";
  }
  out << exact << "/" << n << " exact\n";
}

}  // namespace

const std::vector<SkippedFile>& Dataset::skipped_files() const {
  static const std::vector<SkippedFile> none;
  return none;
}

Batch prompt_answer_rows(int64_t rows, const std::function<PromptAnswer(int64_t row)>& example) {
  std::vector<std::vector<int64_t>> inputs, answers;
  for (int64_t row = 0; row < rows; ++row) {
    PromptAnswer e = example(row);
    inputs.push_back(std::move(e.input));
    answers.push_back(std::move(e.target));
  }
  return prompt_answer_batch(inputs, answers);
}

void print_greedy_samples(SampleModel& model, const Vocab& vocab, const std::string& what, int64_t n,
                          const std::function<PromptAnswer(int64_t row)>& example, std::ostream& out) {
  out << "greedy samples on held-out " << what << ":\n";
  int64_t exact = 0;
  for (int64_t row = 0; row < n; ++row) {
    const PromptAnswer e = example(row);
    std::vector<int64_t> answer = model.answer(e.input, static_cast<int64_t>(e.target.size()) + 1);
    if (!answer.empty() && answer.back() == kEos) answer.pop_back();
    const bool ok = answer == e.target;
    exact += ok;
    out << "  input  " << vocab.decode(e.input) << "\n  target " << vocab.decode(e.target) << "\n  model  "
        << vocab.decode(answer) << (ok ? "   (exact)" : "   (differs)") << "\n";
  }
  out << exact << "/" << n << " exact\n";
}

void SyntheticData::print_samples(SampleModel& model, int64_t count, const std::string&, std::ostream& out) const {
  if (task_.config().kind == TaskKind::PeriodicLm) return print_periodic_samples(task_, model, count, out);
  Batch b = task_.batch(0, Split::HeldOut);
  const int64_t n = std::min<int64_t>(count, b.tgt_out.defined() ? b.tgt_out.size(0) : b.tokens.size(0));
  print_greedy_samples(model, vocab(), "sequences", n, [&](int64_t row) {
    SyntheticTask::Sample s = task_.held_out_case(row);
    return PromptAnswer{std::move(s.source), std::move(s.target)};
  }, out);
}

void TextData::print_samples(SampleModel& model, int64_t, const std::string&, std::ostream& out) const {
  const std::string& text = text_.bytes();
  const int64_t prompt_len = std::min<int64_t>(32, text_.val_size());
  std::vector<int64_t> prompt;
  for (int64_t i = 0; i < prompt_len; ++i) prompt.push_back(static_cast<unsigned char>(text[text_.train_size() + i]));
  std::string s;
  for (int64_t id : model.continue_prompt(prompt, false)) s += static_cast<char>(id);
  out << "sample (prompt: the first " << prompt_len << " bytes of the validation text):\n"
      << printable_text(s) << "\n";
}

void TokenData::print_samples(SampleModel& model, int64_t, const std::string&, std::ostream& out) const {
  bool validation = false;
  const std::vector<int64_t> prompt = tokens_.sample_prompt(&validation);
  std::vector<int64_t> seq = model.continue_prompt(prompt, false);
  out << "sample (prompt: the first " << prompt.size() << " ids of the " << (validation ? "validation" : "training")
      << " split):\n" << vocab_.decode(seq) << "\n";
}

}  // namespace relgrad
