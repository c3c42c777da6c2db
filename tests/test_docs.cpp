// Keeps the docs true: every config key the program accepts is documented in docs/cli.md with its
// current default, the shipped default config is the built-in one, every path a comment or a doc
// names exists, and nothing points outside the repository.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "train/config/config.h"

namespace {
std::string repo_file(const std::string& relative) {
  std::string golden = RELGRAD_GOLDEN_DIR;  // <repo>/tests/golden
  std::ifstream in(golden + "/../../" + relative);
  REQUIRE_MESSAGE(in.good(), "cannot read ", relative);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

TEST_CASE("docs: docs/cli.md lists every config key with its type, default and meaning") {
  const std::string doc = repo_file("docs/cli.md");
  std::istringstream help(relgrad::config_help());
  std::string line;
  int keys = 0;
  while (std::getline(help, line)) {
    ++keys;
    CHECK_MESSAGE(doc.find(line) != std::string::npos, "docs/cli.md lacks or has a stale line for: ", line);
  }
  CHECK(keys > 50);
}

TEST_CASE("docs: configs/default.toml is the built-in default run") {
  // Start from the plain struct defaults, so every value must come from the file or agree anyway.
  relgrad::RunConfig plain;
  relgrad::load_config_file(plain, std::string(RELGRAD_GOLDEN_DIR) + "/../../configs/default.toml");
  CHECK(relgrad::config_to_json(plain) == relgrad::config_to_json(relgrad::RunConfig::defaults()));
}

// ---- every path named in a comment or a doc exists; no comment points outside the repository ----
// Comments and docs name files (`core/tensor.h`, `core/cpu/matmul.{h,cpp}`, `cuda/*.cu`); files move
// and get renamed, and a stale name sends the reader nowhere. Only comments are read in source files:
// string literals may name run-time paths (a run's out_dir) that need not exist. In markdown every
// line is read; Python docstrings count as comments. A path starts with a top folder (core/, docs/,
// ...) at a word boundary or after "./" ("../x" and "$root/x" are relative to something else) and
// ends in a known extension or "/" (a folder), or holds a glob (a match must exist); brace lists and
// the a.h/.cpp shorthand are expanded; "train/eval" and the like are prose. The repository must also
// stand alone, so no comment or doc may send the reader to an issue tracker, a notes or research
// folder, a file beside the checkout or a folder of this machine.
namespace {
namespace fs = std::filesystem;

enum class Syntax { CLike, Python, Shell, CMake, Toml, Markdown };

struct Problem {
  std::string file;
  int line;
  std::string message;
};

struct Scan {
  int references = 0;  // paths checked
  std::vector<Problem> problems;
};

// Named in docs or comments but made at run time, never tracked; each with the reason.
const std::map<std::string, std::string>& generated_paths() {
  static const std::map<std::string, std::string> allowed = {
      {"data/kjv.txt", "the default corpus, written by tools/setup.sh"},
  };
  return allowed;
}

// The comment text of a source file, one string per line (code left out, line numbers kept).
std::vector<std::string> comment_lines(const std::string& text, Syntax syntax) {
  std::vector<std::string> lines(1);
  if (syntax == Syntax::Markdown) {
    for (char ch : text) {
      if (ch == '\n') lines.emplace_back();
      else lines.back().push_back(ch);
    }
    return lines;
  }
  enum State { Code, LineComment, BlockComment, String, Char, Raw, Triple } state = Code;
  bool docstring = false;  // Python: a triple-quoted string opening its line is a docstring (read)
  char quote = '"';
  std::string raw_end;  // C++ raw string: the `)delim"` that ends it
  auto at_line_start = [&](size_t i) {
    size_t k = i;
    while (k > 0 && (text[k - 1] == ' ' || text[k - 1] == '\t')) --k;
    while (k > 0 && std::isalpha(static_cast<unsigned char>(text[k - 1]))) --k;  // r"""...""" prefixes
    return k == 0 || text[k - 1] == '\n';
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const char next = i + 1 < text.size() ? text[i + 1] : '\0';
    const char prev = i > 0 ? text[i - 1] : '\n';
    if (c == '\n') {
      lines.emplace_back();
      if (state == LineComment || state == String || state == Char) state = Code;
      continue;
    }
    switch (state) {
      case Code:
        if (syntax == Syntax::CLike) {
          if (c == '/' && next == '/') state = LineComment, ++i;
          else if (c == '/' && next == '*') state = BlockComment, ++i;
          else if (c == '"' && prev == 'R' && !(i >= 2 && (std::isalnum(static_cast<unsigned char>(text[i - 2])) ||
                                                            text[i - 2] == '_'))) {
            size_t open = text.find('(', i);
            raw_end = ")" + text.substr(i + 1, open == std::string::npos ? 0 : open - i - 1) + "\"";
            state = Raw;
          } else if (c == '"') state = String;
          else if (c == '\'' && !std::isalnum(static_cast<unsigned char>(prev)) && prev != '_') state = Char;  // 1'000
        } else if (syntax == Syntax::Python && (c == '"' || c == '\'') && text.compare(i, 3, std::string(3, c)) == 0) {
          docstring = at_line_start(i), quote = c, state = Triple, i += 2;
        } else if (syntax != Syntax::CMake && (c == '"' || c == '\'')) {
          quote = c, state = String;
        } else if (syntax == Syntax::CMake && c == '"') {
          quote = c, state = String;
        } else if (c == '#' && (syntax != Syntax::Shell || std::isspace(static_cast<unsigned char>(prev)) || prev == ';')) {
          state = LineComment;
        } else if (c == '\\') {
          ++i;
        }
        break;
      case LineComment: lines.back().push_back(c); break;
      case BlockComment:
        if (c == '*' && next == '/') state = Code, ++i;
        else lines.back().push_back(c);
        break;
      case String:
      case Char:
        if (c == '\\' && next != '\n') ++i;
        else if (c == (state == Char ? '\'' : (syntax == Syntax::CLike ? '"' : quote))) state = Code;
        break;
      case Raw:
        if (text.compare(i, raw_end.size(), raw_end) == 0) state = Code, i += raw_end.size() - 1;
        break;
      case Triple:
        if (text.compare(i, 3, std::string(3, quote)) == 0) state = Code, i += 2;
        else if (docstring) lines.back().push_back(c);
        break;
    }
  }
  return lines;
}

// `a/{b,c}/d.{h,cpp}` → a/b/d.h a/b/d.cpp a/c/d.h a/c/d.cpp (nested braces are not used), and the
// shorthand `a/d.h/.cpp` → a/d.h a/d.cpp.
std::vector<std::string> expand_braces(const std::string& path) {
  const size_t open = path.find('{');
  if (open == std::string::npos) {
    const size_t alt = path.rfind("/."), dot = alt == std::string::npos ? alt : path.rfind('.', alt);
    const size_t slash = alt == std::string::npos ? alt : path.rfind('/', alt - 1);
    if (alt == std::string::npos || dot == std::string::npos || (slash != std::string::npos && dot < slash) ||
        path.find('/', alt + 1) != std::string::npos)
      return {path};
    return {path.substr(0, alt), path.substr(0, dot) + path.substr(alt + 1)};
  }
  const size_t close = path.find('}', open);
  std::vector<std::string> out;
  const std::string head = path.substr(0, open), tail = path.substr(close + 1);
  std::string alternatives = path.substr(open + 1, close - open - 1) + ",";
  for (size_t start = 0, comma; (comma = alternatives.find(',', start)) != std::string::npos; start = comma + 1)
    for (const std::string& rest : expand_braces(tail)) out.push_back(head + alternatives.substr(start, comma - start) + rest);
  return out;
}

// Whether `path` (relative to root; `*` and `?` match within one component; a trailing / asks for a
// directory) names something in the tree.
bool exists_in(const fs::path& root, const std::string& path) {
  std::vector<std::string> parts;
  std::stringstream ss(path);
  for (std::string part; std::getline(ss, part, '/');) parts.push_back(part);
  const bool want_dir = !path.empty() && path.back() == '/';
  std::vector<fs::path> here = {root};
  for (const std::string& part : parts) {
    std::vector<fs::path> next;
    if (part.find_first_of("*?") == std::string::npos) {
      for (const fs::path& p : here)
        if (fs::exists(p / part)) next.push_back(p / part);
    } else {
      std::string pattern;
      for (char ch : part)
        pattern += ch == '*' ? std::string("[^/]*") : ch == '?' ? std::string("[^/]")
                 : std::isalnum(static_cast<unsigned char>(ch)) ? std::string(1, ch) : std::string("\\") + ch;
      const std::regex glob(pattern);
      std::error_code ec;
      for (const fs::path& p : here)
        if (fs::is_directory(p, ec))
          for (const auto& entry : fs::directory_iterator(p, ec))
            if (std::regex_match(entry.path().filename().string(), glob)) next.push_back(entry.path());
    }
    here = std::move(next);
  }
  for (const fs::path& p : here)
    if (!want_dir || fs::is_directory(p)) return true;
  return false;
}

bool has_known_extension(const std::string& path) {
  static const std::set<std::string> known = {"h", "cpp", "cu", "cuh", "def", "sh", "py", "toml", "md", "txt",
                                              "json", "jsonl", "csv", "svg", "png", "safetensors", "supp",
                                              "mid", "bin", "yml", "yaml", "cmake"};
  const size_t slash = path.rfind('/'), dot = path.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return false;
  return known.count(path.substr(dot + 1)) > 0;
}

// Checks one file's text: `name` is its path relative to `root` (for the messages).
Scan scan_text(const fs::path& root, const std::string& name, const std::string& text, Syntax syntax) {
  static const std::vector<std::string> tops = {"core", "autograd", "layers", "cuda", "train", "tests", "examples",
                                                "bench", "tools", "fuzz", "configs", "docs", "data"};
  // Issue numbers, notes and research folders, files beside the checkout, this machine's folders.
  static const std::regex outside(
      R"((\bissues?\s*#?\d+)|(\.\./shared\b)|(\bshared/(bench|seeds|research|notes)\b)|((^|[^\w.])/(work|home|root)/)|)"
      R"(((^|[^\w./-])(notes|research)/)|(\bresearch\s+(doc|notes)\b))",
      std::regex::icase);
  auto path_char = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || std::strchr("_./*-", ch); };
  Scan scan;
  const std::vector<std::string> lines = comment_lines(text, syntax);
  for (size_t n = 0; n < lines.size(); ++n) {
    const std::string& line = lines[n];
    // Read on into the next line, so that a phrase wrapped there ("the research\n// notes") is seen;
    // a match that starts on the next line is reported there.
    const std::string joined = n + 1 < lines.size() ? line + " " + lines[n + 1] : line;
    std::smatch m;
    if (std::regex_search(joined, m, outside) && static_cast<size_t>(m.position()) < line.size()) {
      std::string what = m.str();
      what.erase(0, what.find_first_not_of(" \t(\"'`"));
      scan.problems.push_back({name, static_cast<int>(n + 1), "points outside the repository: \"" + what + "\""});
    }
    for (size_t i = 0; i < line.size(); ++i) {
      // A path starts at a word boundary or after "./" ("../x" and "$root/x" are relative to elsewhere).
      const size_t before = i >= 2 && line.compare(i - 2, 2, "./") == 0 ? i - 2 : i;
      if (before > 0 && (path_char(line[before - 1]) || line[before - 1] == '$' || line[before - 1] == '~')) continue;
      std::string top;
      for (const std::string& t : tops)
        if (line.compare(i, t.size() + 1, t + "/") == 0) top = t;
      if (top.empty()) continue;
      size_t end = i + top.size() + 1;
      int depth = 0;
      for (; end < line.size(); ++end) {
        const char ch = line[end];
        if (ch == '{') ++depth;
        else if (ch == '}' && depth > 0) --depth;
        else if (ch == ',' && depth > 0) continue;
        else if (!path_char(ch)) break;
      }
      std::string token = line.substr(i, end - i);
      if (depth > 0) token = token.substr(0, token.find('{'));  // an unclosed brace: prose, not a path
      while (!token.empty() && (token.back() == '.' || token.back() == '-')) token.pop_back();
      i = end;
      if (token == top + "/") continue;  // a top folder as a word ("layers/ schemes")
      for (const std::string& path : expand_braces(token)) {
        const bool glob = path.find_first_of("*?") != std::string::npos;
        if (!glob && path.back() != '/' && !has_known_extension(path)) continue;  // "train/eval": prose
        ++scan.references;
        if (generated_paths().count(path)) continue;
        if (!exists_in(root, path))
          scan.problems.push_back({name, static_cast<int>(n + 1), "names " + path + ", which does not exist"});
      }
    }
  }
  return scan;
}

// The files to read: the tracked source folders, skipping data (golden files, fuzz corpora) and builds.
std::vector<std::pair<fs::path, Syntax>> files_to_check(const fs::path& root) {
  std::vector<std::pair<fs::path, Syntax>> files;
  auto syntax_of = [](const fs::path& p, bool in_docs, Syntax& s) {
    const std::string name = p.filename().string(), ext = p.extension().string();
    if (name == "CMakeLists.txt") s = Syntax::CMake;
    else if (ext == ".h" || ext == ".cpp" || ext == ".cu" || ext == ".cuh" || ext == ".def") s = Syntax::CLike;
    else if (ext == ".py") s = Syntax::Python;
    else if (ext == ".sh") s = Syntax::Shell;
    else if (ext == ".toml") s = Syntax::Toml;
    else if (ext == ".md" && (in_docs || name == "README.md")) s = Syntax::Markdown;
    else return false;
    return true;
  };
  for (const char* top : {"README.md", "CMakeLists.txt", "relgrad.h"}) {
    Syntax s;
    if (fs::exists(root / top) && syntax_of(root / top, false, s)) files.emplace_back(root / top, s);
  }
  const std::set<std::string> skipped = {"tests/golden", "fuzz/corpus", "fuzz/dict", "data"};
  for (const char* top : {"core", "autograd", "layers", "cuda", "train", "tests", "examples", "bench", "tools", "fuzz",
                          "configs", "docs"}) {
    if (!fs::is_directory(root / top)) continue;
    for (auto it = fs::recursive_directory_iterator(root / top); it != fs::recursive_directory_iterator(); ++it) {
      const std::string relative = fs::relative(it->path(), root).generic_string();
      const std::string leaf = it->path().filename().string();
      if (it->is_directory()) {
        if (skipped.count(relative) || leaf.rfind("build", 0) == 0 || leaf[0] == '.') it.disable_recursion_pending();
        continue;
      }
      Syntax s;
      if (syntax_of(it->path(), std::string(top) == "docs", s)) files.emplace_back(it->path(), s);
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path repo_root() { return fs::canonical(fs::path(RELGRAD_GOLDEN_DIR) / ".." / ".."); }
}  // namespace

TEST_CASE("docs: the path checker finds missing paths and outside pointers, in comments only") {
  const std::string sample =
      "// tests/test_docs.cpp and tests/{main,test_docs}.cpp exist; so does tests/*.cpp (issue 7)\n"
      "const char* out = \"tests/not_here.h\";  // a literal is code; tests/also_not_here.h is a comment\n"
      "/* block: docs/cli.md, then docs/nothing_*.md */\n"
      "int x = 1'000; char q = '\"'; const char* r = R\"(// tests/in_raw.h)\";  // docs/cli.md\n"
      "// core/ alone is a word; ../tests/elsewhere.h is not a repository path, ./tests/none.h is\n"
      "// tests/testing.h/.cpp: the header exists, the source does not\n";
  const Scan scan = scan_text(repo_root(), "sample.cpp", sample, Syntax::CLike);
  CHECK(scan.references == 11);  // 1 + 2 (braces) + 1 (glob); 1; 2; 1; 1; 2
  std::vector<std::string> got;
  for (const Problem& p : scan.problems) got.push_back(p.file + ":" + std::to_string(p.line) + ": " + p.message);
  const std::vector<std::string> want = {
      "sample.cpp:1: points outside the repository: \"issue 7\"",
      "sample.cpp:2: names tests/also_not_here.h, which does not exist",
      "sample.cpp:3: names docs/nothing_*.md, which does not exist",
      "sample.cpp:5: names tests/none.h, which does not exist",
      "sample.cpp:6: names tests/testing.cpp, which does not exist",
  };
  CHECK(got == want);
  // Shell and markdown: `$#` and `${x#y}` are not comments; markdown is read whole.
  const Scan sh = scan_text(repo_root(), "s.sh", "n=$# y=${x#tests/no.h} # see tests/none.sh\n", Syntax::Shell);
  REQUIRE(sh.problems.size() == 1);
  CHECK(sh.problems[0].message == "names tests/none.sh, which does not exist");
  const Scan md = scan_text(repo_root(), "d.md", "See `docs/cli.md` and ../shared/research/x.md.\nAs the research\nnotes say.\n",
                            Syntax::Markdown);
  CHECK(md.references == 1);
  REQUIRE(md.problems.size() == 2);
  CHECK(md.problems[0].message == "points outside the repository: \"../shared\"");
  CHECK(md.problems[1].line == 2);  // wrapped onto the next line, reported where it starts
}

TEST_CASE("docs: every path named in a comment or a doc exists, and none points outside the repository") {
  const fs::path root = repo_root();
  int references = 0, files = 0;
  std::vector<Problem> problems;
  for (const auto& [path, syntax] : files_to_check(root)) {
    ++files;
    const Scan scan = scan_text(root, fs::relative(path, root).generic_string(), read_all(path), syntax);
    references += scan.references;
    problems.insert(problems.end(), scan.problems.begin(), scan.problems.end());
  }
  for (const Problem& p : problems) FAIL_CHECK(p.file << ":" << p.line << ": " << p.message);
  MESSAGE(files << " files, " << references << " path references, " << problems.size() << " problems");
  CHECK(files > 200);
  CHECK(references > 100);  // the scan reads something: a broken walk or lexer would find nothing
}

// ctest runs each doctest case by name (doctest_discover_tests in tests/CMakeLists.txt), and CMake
// splits a name at ';': a case with ';' in its name would run nothing under ctest and still pass.
TEST_CASE("tests: no test case name contains a semicolon (ctest would run nothing under it)") {
  const fs::path tests = repo_root() / "tests";
  int cases = 0;
  for (const auto& entry : fs::directory_iterator(tests)) {
    if (entry.path().extension() != ".cpp") continue;
    std::istringstream in(read_all(entry.path()));
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      const size_t at = line.find("TEST_CASE(\"");
      if (at == std::string::npos || at != line.find_first_not_of(' ')) continue;
      ++cases;
      const size_t end = line.find('"', at + 11);  // names hold no quotes
      const std::string name = line.substr(at + 11, end == std::string::npos ? std::string::npos : end - at - 11);
      CHECK_MESSAGE(name.find(';') == std::string::npos, "tests/", entry.path().filename().string(), ":", n,
                    ": test name with ';': ", name);
    }
  }
  CHECK(cases > 400);
}
