// Keeps docs/checkpoint-format.md true to the scheme registry (layers/schemes.h), for a reader who
// rebuilds relgrad's models from that document alone: every registered scheme has its row in 2.2 (its
// tensors), its name in 3.1 (the config's choices) and its bullet in 3.5 (its formula); 3.4's hook
// lines (content_bias, attention_weights) and 3.5's bullets name the same schemes by the same hook;
// and the dynamic_bias widths the document gives as examples are the ones the registry builds.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "layers/schemes.h"

using namespace relgrad;

namespace {

std::string format_doc() {
  std::ifstream in(std::string(RELGRAD_GOLDEN_DIR) + "/../../docs/checkpoint-format.md");
  REQUIRE_MESSAGE(in.good(), "cannot read docs/checkpoint-format.md");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The text of section "### <number> " up to the next heading.
std::string section(const std::string& doc, const std::string& number) {
  const size_t at = doc.find("\n### " + number + " ");
  REQUIRE_MESSAGE(at != std::string::npos, "docs/checkpoint-format.md has no section ", number);
  const size_t end = doc.find("\n#", at + 1);
  return doc.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The lowercase identifiers (a-z, 0-9, _; "t5", "p_rope") in `text`.
std::set<std::string> words(const std::string& text) {
  std::set<std::string> out;
  const std::regex word("[a-z_][a-z_0-9]*");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), word); it != std::sregex_iterator(); ++it)
    out.insert(it->str());
  return out;
}

// 2.2's table: the names in backquotes in each row's first cell.
std::set<std::string> table_schemes(const std::string& doc) {
  std::set<std::string> out;
  const std::regex quoted("`([a-z_0-9]+)`");
  for (const std::string& line : lines(section(doc, "2.2"))) {
    if (line.rfind("| `", 0) != 0) continue;
    const std::string first = line.substr(1, line.find('|', 1) - 1);
    for (auto it = std::sregex_iterator(first.begin(), first.end(), quoted); it != std::sregex_iterator(); ++it)
      out.insert((*it)[1]);
  }
  return out;
}

// 3.5's top-level bullets ("- **name** …" up to the next one), by every name in bold on the first line
// ("- **kerple**, **sandwich**, **dynamic_bias** …" is the bullet of all three).
std::map<std::string, std::string> scheme_bullets(const std::string& doc) {
  std::map<std::string, std::string> out;
  std::vector<std::string> names;
  std::string text;
  const auto flush = [&] {
    for (const std::string& n : names) out[n] = text;
  };
  const std::regex bold("\\*\\*([^*]+)\\*\\*");
  for (const std::string& line : lines(section(doc, "3.5"))) {
    if (line.rfind("- ", 0) == 0) {
      flush();
      names.clear();
      text.clear();
      for (auto it = std::sregex_iterator(line.begin(), line.end(), bold); it != std::sregex_iterator(); ++it)
        names.push_back((*it)[1]);
    }
    text += line + "\n";
  }
  flush();
  return out;
}

// 3.4's line for a hook ("[+ content_bias(q, kc, mask): cope, fox (3.5)]"): the schemes it names,
// between the last ':' and the last '('.
std::set<std::string> hook_schemes(const std::string& doc, const std::string& hook) {
  for (const std::string& line : lines(section(doc, "3.4"))) {
    if (line.find(hook + "(") == std::string::npos) continue;
    const size_t colon = line.rfind(':'), paren = line.rfind('(');
    REQUIRE_MESSAGE((colon != std::string::npos && paren != std::string::npos && colon < paren),
                    "3.4's line for ", hook, " names no schemes: ", line);
    return words(line.substr(colon + 1, paren - colon - 1));
  }
  FAIL("docs/checkpoint-format.md 3.4 has no line for ", hook);
  return {};
}

}  // namespace

TEST_CASE("docs: every registered scheme has its row in 2.2, its name in 3.1 and its bullet in 3.5 of docs/checkpoint-format.md") {
  const std::string doc = format_doc();
  const std::set<std::string> rows = table_schemes(doc);
  const std::map<std::string, std::string> bullets = scheme_bullets(doc);
  const std::string config = section(doc, "3.1");
  const size_t list = config.find("`scheme` [");
  REQUIRE(list != std::string::npos);
  const std::set<std::string> choices = words(config.substr(list + 10, config.find(']', list) - list - 10));
  for (const SchemeEntry& e : positional_schemes()) {
    INFO(e.name);
    CHECK_MESSAGE(rows.count(e.name) == 1, "2.2 has no row for ", e.name);
    CHECK_MESSAGE(choices.count(e.name) == 1, "3.1's scheme list lacks ", e.name);
    CHECK_MESSAGE(bullets.count(e.name) == 1, "3.5 has no bullet for ", e.name);
  }
  CHECK(positional_schemes().size() >= 18);  // the built-ins, and so the loop checked them
}

TEST_CASE("docs: 3.4 and 3.5 of docs/checkpoint-format.md name each content-dependent scheme by the same hook") {
  const std::string doc = format_doc();
  const std::map<std::string, std::string> bullets = scheme_bullets(doc);
  for (const std::string hook : {"content_bias", "attention_weights"}) {
    const std::set<std::string> named = hook_schemes(doc, hook);
    CHECK_MESSAGE(!named.empty(), "3.4 names no scheme for ", hook);
    for (const std::string& s : named) CHECK_MESSAGE(find_scheme(s) != nullptr, "3.4 names ", s, ", no scheme");
    for (const SchemeEntry& e : positional_schemes()) {
      if (!bullets.count(e.name)) continue;  // the test above reports it
      const std::string& bullet = bullets.at(e.name);
      INFO(hook, ": ", e.name);
      // 3.4 lists the scheme under the hook exactly when its 3.5 bullet uses it.
      CHECK((bullet.find(hook) != std::string::npos) == (named.count(e.name) == 1));
      // A content bias is not also called a logit bias (the hook the attention reads differs).
      if (hook == std::string("content_bias") && named.count(e.name))
        CHECK_MESSAGE(bullet.find("logit_bias") == std::string::npos, e.name, "'s bullet calls its term logit_bias");
    }
  }
}

// dynamic_bias's hidden width w = ⌊C/4⌋: the examples docs/checkpoint-format.md gives ("C = 10 gives 2")
// are the widths the registry builds, and C < 4 is refused by the entry's check.
TEST_CASE("docs: dynamic_bias's width for C not a multiple of 4 is the one the registry builds") {
  const std::string doc = format_doc();
  const SchemeEntry* entry = find_scheme("dynamic_bias");
  REQUIRE(entry != nullptr);
  const std::regex example("C = ([0-9]+) gives ([0-9]+)");
  int examples = 0;
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), example); it != std::sregex_iterator(); ++it) {
    const int64_t C = std::stoll((*it)[1]), w = std::stoll((*it)[2]);
    INFO("C = ", C);
    PositionalConfig p;
    p.scheme = "dynamic_bias";
    const std::string place = "decoder_self";
    const SchemeContext context{p, place, C, 1, C, true, nullptr};
    std::shared_ptr<PositionalScheme> scheme = entry->make(context);
    bool found = false;
    for (const auto& [name, t] : scheme->named_parameters())
      if (name == "mlp.0.weight") {
        found = true;
        CHECK(t.size(0) == w);
      }
    CHECK(found);
    CHECK(C % 4 != 0);  // the examples are the case the rule is for
    ++examples;
  }
  CHECK(examples >= 2);
  PositionalConfig p;
  p.scheme = "dynamic_bias";
  const std::string key = "model.decoder_self.";
  CHECK(entry->check(SchemeCheck{p, key, true, 3, 1, 3}).find("model.d_model must be at least 4") != std::string::npos);
}
