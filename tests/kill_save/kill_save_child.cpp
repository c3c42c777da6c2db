// The child process of tests/test_kill_save.cpp: saves checkpoints of a Linear(n, n) + AdamW model
// (about 12 n^2 bytes per file) with save_checkpoint, so that the parent can SIGKILL it at random
// moments, or under a file-size limit.
//
//   kill_save_child loop PATH N FIRST_STEP   saves steps FIRST_STEP, FIRST_STEP + 1, ... to PATH until
//                                            killed; after each save returns, writes the step (8 bytes)
//                                            to stdout, so the parent knows what was committed. Each
//                                            step's bias[0] is the step, so a file's data can be
//                                            matched to its metadata.
//   kill_save_child limited PATH N LIMIT     sets RLIMIT_FSIZE to LIMIT bytes (SIGXFSZ ignored: the
//                                            write then fails with EFBIG), saves once; prints the error
//                                            and exits 3 on relgrad::Error, exits 0 on success.
// Exit 2: bad arguments; 4: an exception that is not a relgrad::Error.
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "layers/linear.h"
#include "train/trainer/checkpoint.h"
#include "train/optim/optim.h"

using namespace relgrad;

namespace {

void set_step_values(Linear& model, int64_t step) {
  static_cast<float*>(model.bias.raw_data())[0] = static_cast<float>(step);
  static_cast<float*>(model.weight.raw_data())[0] = static_cast<float>(step) * 0.5f;
}

void save(const std::string& path, Linear& model, AdamW& opt, int64_t step) {
  set_step_values(model, step);
  CheckpointMeta meta;
  meta.step = step;
  meta.config_json = "{\"kill_save_child\":true}";
  meta.data_position = step;
  save_checkpoint(path, model, &opt, meta);
}

bool write_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t put = ::write(fd, c, n);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    c += put;
    n -= static_cast<size_t>(put);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: kill_save_child loop|limited PATH N FIRST_STEP|LIMIT\n";
    return 2;
  }
  const std::string mode = argv[1], path = argv[2];
  const int64_t n = std::atoll(argv[3]);
  const long long arg = std::atoll(argv[4]);
  if (n < 1 || (mode != "loop" && mode != "limited")) return 2;
  try {
    Generator init(42);
    Linear model(n, n, true, &init);
    AdamW opt(model.parameters(), AdamWOptions(0.01));
    opt.zero_grad();
    Tensor x = ones({2, n});
    sum(model(x)).backward();
    opt.step();  // so that the optimizer holds its moments and the file its "optim." tensors
    NoGradGuard no_grad;
    if (mode == "limited") {
      std::signal(SIGXFSZ, SIG_IGN);
      struct rlimit limit {};
      getrlimit(RLIMIT_FSIZE, &limit);
      limit.rlim_cur = static_cast<rlim_t>(arg);
      if (setrlimit(RLIMIT_FSIZE, &limit) != 0) {
        std::perror("setrlimit");
        return 2;
      }
      try {
        save(path, model, opt, 1);
      } catch (const Error& e) {
        std::cout << e.what() << std::endl;
        return 3;
      }
      return 0;
    }
    for (int64_t step = arg;; ++step) {
      save(path, model, opt, step);
      if (!write_all(1, &step, sizeof step)) return 0;  // the parent is gone
    }
  } catch (const Error& e) {
    std::cerr << "kill_save_child: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "kill_save_child: unexpected exception: " << e.what() << "\n";
    return 4;
  }
}
