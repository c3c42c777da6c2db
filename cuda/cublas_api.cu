// cuBLAS, loaded on first use rather than linked. A program linked against libcublas runs cuBLAS's
// start-up code before main (its 500 MB libcublasLt touches fresh memory): about 70 ms on an idle
// machine and half a second on a busy one, for every `relgrad --help`, GPU or not. Loading it with
// dlopen the first time a GEMM needs a handle costs that once, and only in runs that use a GPU.
//
// Each entry point keeps cuBLAS's own name (common.cuh: CublasApi), so tools/check_cuda_calls.sh
// still sees every call and its status check; each pointer's type is checked below against the
// declaration in cublas_api.h, so a signature that changes in a new cuBLAS fails the build.
#include <dlfcn.h>

#include <mutex>
#include <string>
#include <type_traits>

#include "cuda/common.cuh"
#include "cuda/runtime.h"

namespace relgrad::cuda {

namespace {

// The pointer types must pick the real declarations (some names are overloaded in C++).
static_assert(std::is_same_v<decltype(static_cast<CublasApi::Create>(&::cublasCreate_v2)), CublasApi::Create>);
static_assert(std::is_same_v<decltype(static_cast<CublasApi::SetMathMode>(&::cublasSetMathMode)),
                             CublasApi::SetMathMode>);
static_assert(std::is_same_v<decltype(static_cast<CublasApi::GemmStridedBatchedEx>(&::cublasGemmStridedBatchedEx)),
                             CublasApi::GemmStridedBatchedEx>);
static_assert(std::is_same_v<decltype(static_cast<CublasApi::GemmBatchedEx>(&::cublasGemmBatchedEx)),
                             CublasApi::GemmBatchedEx>);
static_assert(std::is_same_v<decltype(static_cast<CublasApi::StatusText>(&::cublasGetStatusString)),
                             CublasApi::StatusText>);

#define RG_STR2(x) #x
#define RG_STR(x) RG_STR2(x)

CublasApi load() {
  // The soname of the cuBLAS these headers declare; the executable's RUNPATH (the CUDA toolkit's
  // library folder, from linking cudart) or the loader's usual paths find it. RELGRAD_CUBLAS_PATH
  // (cuda/CMakeLists.txt) is the file the build found, tried second.
  const std::string soname = "libcublas.so." RG_STR(CUBLAS_VER_MAJOR);
  void* lib = ::dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string why = lib ? "" : ::dlerror();
#ifdef RELGRAD_CUBLAS_PATH
  if (!lib) {
    lib = ::dlopen(RELGRAD_CUBLAS_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!lib) why += std::string("; ") + ::dlerror();
  }
#endif
  if (!lib)
    throw DeviceError("[cublas] cannot load cuBLAS (" + soname + "): " + why +
                      "; install the CUDA toolkit's cuBLAS or add its folder to LD_LIBRARY_PATH");
  // The handle is never closed: the driver may already be gone when static destructors run.
  auto symbol = [&](auto& slot, const char* name) {
    ::dlerror();
    void* p = ::dlsym(lib, name);
    if (!p) throw DeviceError(std::string("[cublas] ") + soname + " has no entry point " + name);
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(p);
  };
  CublasApi api;
  symbol(api.cublasCreate_v2, "cublasCreate_v2");
  symbol(api.cublasSetMathMode, "cublasSetMathMode");
  symbol(api.cublasGemmStridedBatchedEx, "cublasGemmStridedBatchedEx");
  symbol(api.cublasGemmBatchedEx, "cublasGemmBatchedEx");
  symbol(api.cublasGetStatusString, "cublasGetStatusString");
  symbol(api.cublasGetStatusName, "cublasGetStatusName");
  return api;
}

}  // namespace

const CublasApi& cublas() {
  // Loaded once; a failure is not cached, so it is reported (and retried) at every use.
  static std::mutex mutex;
  static CublasApi api;
  static bool loaded = false;
  std::lock_guard<std::mutex> lock(mutex);
  if (!loaded) {
    api = load();
    loaded = true;
  }
  return api;
}

void load_cublas() { cublas(); }

bool cublas_loaded() {
  void* lib = ::dlopen("libcublas.so." RG_STR(CUBLAS_VER_MAJOR), RTLD_NOW | RTLD_NOLOAD);
  return lib != nullptr;  // (a handle from RTLD_NOLOAD keeps a reference: harmless, never closed)
}

}  // namespace relgrad::cuda
