// CUDA events for the op-level profiler (cuda/timer.h): plain cudaEvent_t behind void*, so that the
// callers above (core/backend/timeline.cpp) need no CUDA header.
#include "cuda/common.cuh"
#include "cuda/timer.h"

namespace relgrad::cuda {

void* event_create(int device) {
  check_device(device, "profile");
  DeviceGuard guard(device, "profile");
  cudaEvent_t event = nullptr;
  RG_CUDA_CHECK(cudaEventCreate(&event), "profile");  // timing on (cudaEventDefault)
  return static_cast<void*>(event);
}

void event_destroy(void* event, int device) {
  if (event == nullptr) return;
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;  // best effort: never throws
  if (previous != device && cudaSetDevice(device) != cudaSuccess) return;  // best effort
  cudaEventDestroy(static_cast<cudaEvent_t>(event));  // best effort
  if (previous >= 0 && previous != device) cudaSetDevice(previous);  // best effort
}

void event_record(void* event, int device) {
  DeviceGuard guard(device, "profile");
  RG_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event), 0), "profile");  // the legacy default stream
}

void event_synchronize(void* event, int device) {
  DeviceGuard guard(device, "profile");
  RG_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event)), "profile");
}

float event_elapsed_ms(void* start, void* end, int device) {
  DeviceGuard guard(device, "profile");
  float ms = 0;
  RG_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)), "profile");
  return ms;
}

}  // namespace relgrad::cuda
