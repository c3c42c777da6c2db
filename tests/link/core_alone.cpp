// A program on relgrad's core floor alone (tests/CMakeLists.txt links relgrad_core whole and nothing
// above it): tensors, strided views over shared storage, raw copies, printing and a safetensors round
// trip, with no autograd linked. It checks its results itself and exits non-zero on any mismatch.
//   usage: core_alone SCRATCH_DIR
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "core/safetensors.h"
#include "core/tensor.h"

using namespace relgrad;

namespace {
int failures = 0;
void expect(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "core_alone: FAILED %s\n", what);
    ++failures;
  }
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: core_alone SCRATCH_DIR\n");
    return 2;
  }
  try {
    // x (2, 3) = 0..5; its transpose is a view (3, 2) with strides (1, 3) over the same storage.
    Tensor x = arange(6.0, TensorOptions(kFloat64));
    Tensor m = make_view(x, {2, 3}, {3, 1}, 0);
    Tensor mt = make_view(m, {3, 2}, {1, 3}, 0);
    expect(!mt.is_contiguous(), "a transposed view is not contiguous");
    Tensor packed = copy_as(mt, TensorOptions(kFloat32));  // raw copy: contiguous, converted
    expect(packed.is_contiguous() && packed.dtype() == kFloat32, "copy_as packs and converts");
    expect(packed.to_vector<float>() == std::vector<float>({0, 3, 1, 4, 2, 5}), "copy_as reads through strides");
    // A broadcast source (stride 0) copied into a (2, 3) tensor.
    Tensor row = from_vector<double>({10, 20, 30}, {3});
    Tensor out = zeros({2, 3}, kFloat64);
    copy_into(out, row, "core_alone");
    expect(out.to_vector<double>() == std::vector<double>({10, 20, 30, 10, 20, 30}), "copy_into broadcasts");
    // Writes through a view reach every view of the storage.
    copy_into(make_view(x, {1}, {1}, 4), scalar_tensor(-1.0, kFloat64), "core_alone");
    expect(m.to_vector<double>()[4] == -1.0, "views share storage");
    expect(to_string(m).find("-1.0000") != std::string::npos, "printing");
    // safetensors round trip of a strided view (written contiguous).
    const std::string path = std::string(argv[1]) + "/core_alone.safetensors";
    save_safetensors(path, {{"mt", mt}}, {{"who", "core_alone"}});
    SafetensorsFile file = load_safetensors(path);
    expect(file.metadata.at("who") == "core_alone", "safetensors metadata");
    expect(file.tensors.at("mt").shape() == Shape({3, 2}), "safetensors shape");
    expect(file.tensors.at("mt").to_vector<double>() == std::vector<double>({0, 3, 1, -1, 2, 5}), "safetensors values");
    std::remove(path.c_str());
    // Bad input is an error naming the op, not a crash.
    bool refused = false;
    try {
      copy_as(Tensor(), TensorOptions(kFloat32));
    } catch (const Error& e) {
      refused = std::string(e.what()) == "[copy_as] source is an undefined tensor";
    }
    expect(refused, "copy_as refuses an undefined tensor, naming itself");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "core_alone: unexpected error: %s\n", e.what());
    return 1;
  }
  if (failures == 0) std::printf("core_alone: ok (tensors, views, copies, printing, safetensors with core alone)\n");
  return failures == 0 ? 0 : 1;
}
