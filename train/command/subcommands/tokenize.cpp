// relgrad tokenize INPUT OUTPUT: a file's bytes as a token data file (vocab 256).
#include <ostream>

#include "core/file_io.h"
#include "train/command/output_guard.h"
#include "train/command/subcommand.h"
#include "train/data/token_file.h"

namespace relgrad::cli_detail {
namespace {

class TokenizeCommand final : public Subcommand {
 public:
  void declare(CommandLine& app) override {
    app.add_option("input", input_, "any file").required();
    app.add_option("output", output_, "the token file to write (atomically)").required();
  }

  int run(CommandLine&, std::ostream& out) override {
    refuse_output_over_input("tokenize", {{"the input", input_}}, {{"the output", output_}});
    const std::string bytes = read_file(input_, "tokenize", uint64_t(1) << 31);  // ids are int32 counts
    std::vector<int32_t> ids(bytes.begin(), bytes.end());
    for (int32_t& id : ids) id &= 0xFF;  // char may be signed: the id is the byte's unsigned value
    write_token_file(output_, ids, 256);
    out << "wrote " << output_ << ": " << ids.size() << " tokens, vocab_size 256\n";
    return 0;
  }

 private:
  std::string input_, output_;
};

}  // namespace

std::unique_ptr<Subcommand> make_tokenize_command() { return std::make_unique<TokenizeCommand>(); }

}  // namespace relgrad::cli_detail
