// Keeps the reading path (docs/learn.md) true. Each stop of the path names line ranges of library
// files in a table row
//
//   | `autograd/engine.cpp` | 144–162 | `Tensor record(` | `return output;` |
//
// with the text of the range's first and last line. Code moves, and a range that no longer holds
// what the text says sends the reader to the wrong lines, so every row is checked: the file exists,
// the range lies inside it, its first line holds the first text and its last line the last text.
// A range whose last line is a closing brace must end the block it opened: its braces balance, so
// an anchor like `}` cannot close on some other function's end after code moved.
// The path must also link the ten numbered examples (examples/01_tensors.cpp …), in order, and its
// ranges above the appendix stay between 1,500 and 3,000 lines (every line of autograd/ and layers/
// that example 07 runs, tools/check_learn_path.sh, is about 2,750: a path to read in three or four
// evenings, not the whole library). The appendix's ranges are checked but not counted.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

const std::string kRepo = std::string(RELGRAD_GOLDEN_DIR) + "/../..";  // <repo>/tests/golden

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

struct ReadingRange {
  std::string file, first_text, last_text;
  int64_t first = 0, last = 0;
  int doc_line = 0;
  bool appendix = false;  // below "## Appendix": checked, not counted in the path's length
};

// The braces of lines [first, last] balance (never below zero), outside comments, strings and chars.
// A namespace's braces do not count: a range from a header's first line may open one and end on a
// class's "};" inside it.
bool braces_balance(const std::vector<std::string>& lines, int64_t first, int64_t last) {
  static const std::regex namespace_line(R"(^\s*(namespace\b[^{]*\{\s*|\}\s*//\s*namespace\b.*)$)");
  int depth = 0;
  bool block_comment = false;
  for (int64_t n = first; n <= last; ++n) {
    const std::string& line = lines[n - 1];
    if (!block_comment && std::regex_match(line, namespace_line)) continue;
    char quote = 0;
    for (size_t i = 0; i < line.size(); ++i) {
      const char c = line[i], next = i + 1 < line.size() ? line[i + 1] : '\0';
      if (block_comment) {
        if (c == '*' && next == '/') block_comment = false, ++i;
      } else if (quote) {
        if (c == '\\') ++i;
        else if (c == quote) quote = 0;
      } else if (c == '/' && next == '/') {
        break;
      } else if (c == '/' && next == '*') {
        block_comment = true, ++i;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '{') {
        ++depth;
      } else if (c == '}' && --depth < 0) {
        return false;
      }
    }
  }
  return depth == 0;
}

// Every table row of the form above, in the order of the document.
std::vector<ReadingRange> reading_ranges(const std::string& doc) {
  static const std::regex row(R"(^\|\s*`([^`]+)`\s*\|\s*(\d+)\s*(?:–|-)\s*(\d+)\s*\|\s*`([^`]+)`\s*\|\s*`([^`]+)`\s*\|)");
  std::vector<ReadingRange> out;
  std::istringstream in(doc);
  int n = 0;
  bool appendix = false;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.rfind("## Appendix", 0) == 0) appendix = true;
    std::smatch m;
    if (!std::regex_search(line, m, row)) continue;
    out.push_back({m[1], m[4], m[5], std::stoll(m[2]), std::stoll(m[3]), n, appendix});
  }
  return out;
}

// What is wrong with one range, against the repository at `root` ("" when it holds).
std::string range_problem(const ReadingRange& r, const std::string& root) {
  const std::string where = "docs/learn.md:" + std::to_string(r.doc_line) + ": `" + r.file + "` " +
                            std::to_string(r.first) + "–" + std::to_string(r.last) + ": ";
  if (!std::filesystem::is_regular_file(root + "/" + r.file)) return where + "no such file";
  const std::vector<std::string> lines = read_lines(root + "/" + r.file);
  if (r.first < 1 || r.first > r.last) return where + "not a range";
  if (r.last > static_cast<int64_t>(lines.size()))
    return where + "the file has only " + std::to_string(lines.size()) + " lines";
  if (lines[r.first - 1].find(r.first_text) == std::string::npos)
    return where + "line " + std::to_string(r.first) + " is `" + lines[r.first - 1] + "`, not `" + r.first_text + "`";
  if (lines[r.last - 1].find(r.last_text) == std::string::npos)
    return where + "line " + std::to_string(r.last) + " is `" + lines[r.last - 1] + "`, not `" + r.last_text + "`";
  if (r.last_text.rfind("}", 0) == 0 && !braces_balance(lines, r.first, r.last))
    return where + "ends on `" + r.last_text + "` but its braces do not balance: it does not end the block it opened";
  return "";
}

std::string learn_md() {
  std::ifstream in(kRepo + "/docs/learn.md");
  REQUIRE_MESSAGE(in.good(), "cannot read docs/learn.md");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("learn: the range checker refuses a missing file, a range past the end and a range that moved") {
  const std::string dir = (std::filesystem::temp_directory_path() / "relgrad_learn_check").string();
  std::filesystem::create_directories(dir);
  {
    std::ofstream f(dir + "/a.cpp");
    f << "int first() {\n  return 1;\n}\nint second() {\n  return 2;\n}\n";
  }
  const std::string doc =
      "| `a.cpp` | 1–3 | `int first()` | `}` |\n"        // holds
      "| `a.cpp` | 4-6 | `int second()` | `}` |\n"        // holds (hyphen accepted)
      "| `b.cpp` | 1–2 | `x` | `y` |\n"                   // no such file
      "| `a.cpp` | 4–9 | `int second()` | `}` |\n"        // past the end
      "| `a.cpp` | 2–3 | `int first()` | `}` |\n"         // first line moved
      "| `a.cpp` | 1–2 | `int first()` | `}` |\n"         // last line moved
      "| `a.cpp` | 2–3 | `return 1;` | `}` |\n"          // ends on a brace it did not open
      "| `a.cpp` | 1–6 | `int first()` | `}` |\n";        // two whole functions: balanced
  const std::vector<ReadingRange> ranges = reading_ranges(doc);
  REQUIRE(ranges.size() == 8);
  CHECK(range_problem(ranges[0], dir).empty());
  CHECK(range_problem(ranges[1], dir).empty());
  CHECK(range_problem(ranges[2], dir).find("no such file") != std::string::npos);
  CHECK(range_problem(ranges[3], dir).find("has only 6 lines") != std::string::npos);
  CHECK(range_problem(ranges[4], dir).find("line 2 is") != std::string::npos);
  CHECK(range_problem(ranges[5], dir).find("line 2 is") != std::string::npos);
  CHECK(range_problem(ranges[6], dir).find("braces do not balance") != std::string::npos);
  CHECK(range_problem(ranges[7], dir).empty());
  // A brace inside a string, a char or a comment does not count.
  CHECK(braces_balance({"f() {", "  s = \"}\"; c = '{'; // }", "}"}, 1, 3));
  CHECK_FALSE(braces_balance({"}", "{"}, 1, 2));
  CHECK(braces_balance({"namespace relgrad {", "struct A {", "};"}, 1, 3));
  std::filesystem::remove_all(dir);
}

TEST_CASE("learn: every line range docs/learn.md names exists and starts and ends where the text says") {
  const std::vector<ReadingRange> ranges = reading_ranges(learn_md());
  REQUIRE(ranges.size() >= 20);
  int64_t total = 0, appendix = 0;
  for (const ReadingRange& r : ranges) {
    const std::string problem = range_problem(r, kRepo);
    CHECK_MESSAGE(problem.empty(), problem);
    (r.appendix ? appendix : total) += r.last - r.first + 1;
  }
  MESSAGE("docs/learn.md names ", ranges.size(), " ranges, ", total, " lines of library code on the path and ",
          appendix, " in the appendix");
  CHECK(appendix > 0);   // the appendix is found (its heading), so its ranges are kept out of the count
  CHECK(total >= 1500);  // enough to reach attention ...
  CHECK(total <= 3000);  // ... and still a path, not the whole library
  // The length the text states ("about 2,750 lines") is the length counted, within 50 lines.
  const std::string doc = learn_md();
  static const std::regex stated(R"(about ([0-9]),([0-9]{3}) lines of library code)");
  std::smatch m;
  REQUIRE_MESSAGE(std::regex_search(doc, m, stated), "docs/learn.md does not state its length");
  const int64_t said = std::stoll(m[1].str() + m[2].str());
  CHECK_MESSAGE(std::abs(said - total) <= 50, "docs/learn.md says about ", said, " lines; its ranges hold ", total);
}

TEST_CASE("learn: docs/learn.md links the ten numbered examples, in order, and each exists") {
  const std::string doc = learn_md();
  // Where each example is first named as a file (its path under examples/), in the document's order.
  static const std::regex link(R"(examples/(\d\d)_\w+\.cpp)");
  std::vector<std::string> first(11);
  std::vector<size_t> at(11, std::string::npos);
  for (auto m = std::sregex_iterator(doc.begin(), doc.end(), link); m != std::sregex_iterator(); ++m) {
    const int k = std::stoi((*m)[1]);
    if (k < 1 || k > 10 || at[k] != std::string::npos) continue;
    at[k] = static_cast<size_t>(m->position(0));
    first[k] = m->str(0);
  }
  for (int k = 1; k <= 10; ++k) {
    REQUIRE_MESSAGE(at[k] != std::string::npos, "docs/learn.md does not link example ", k);
    CHECK_MESSAGE(std::filesystem::is_regular_file(kRepo + "/" + first[k]), first[k], " does not exist");
    if (k > 1) CHECK_MESSAGE(at[k] > at[k - 1], first[k], " is named before ", first[k - 1]);
  }
}

TEST_CASE("learn: docs/learn.md lists every exercise in exercises/, and each one it lists exists") {
  const std::string doc = learn_md();
  int exercises = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kRepo + "/exercises")) {
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, std::regex(R"(\d\d_\w+\.cpp)"))) continue;
    ++exercises;
    CHECK_MESSAGE(doc.find("`exercises/" + name + "`") != std::string::npos, "docs/learn.md does not list exercises/", name);
  }
  CHECK(exercises >= 5);
  static const std::regex listed(R"(`(exercises/\d\d_\w+\.cpp)`)");
  for (auto m = std::sregex_iterator(doc.begin(), doc.end(), listed); m != std::sregex_iterator(); ++m)
    CHECK_MESSAGE(std::filesystem::is_regular_file(kRepo + "/" + (*m)[1].str()), (*m)[1].str(), " does not exist");
}

TEST_CASE("learn: each numbered example is one short file, read top to bottom (at most 175 lines)") {
  int examples = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kRepo + "/examples")) {
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, std::regex(R"(\d\d_\w+\.cpp)"))) continue;
    ++examples;
    const size_t lines = read_lines(entry.path().string()).size();
    // 175: example 06 holds a head's forward and its backward through the relative term, both by hand.
    CHECK_MESSAGE(lines <= 175, "examples/", name, " has ", lines, " lines");
  }
  CHECK(examples >= 10);
}
