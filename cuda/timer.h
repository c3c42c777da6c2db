// CUDA events for timing work on a device's default stream: what the op-level profiler
// (autograd/profiler.h) records around each op, through core/backend/timeline.h. An event recorded
// on the stream completes when the GPU reaches it, so the time between two events is the device's
// time between them; reading it needs the later one complete (event_synchronize). Nothing here
// synchronises per record: the profiler waits once per profiled step.
#pragma once

namespace relgrad::cuda {

void* event_create(int device);                   // a timing event on `device`; throws DeviceError
void event_destroy(void* event, int device);      // never throws (best effort)
void event_record(void* event, int device);       // enqueued on `device`'s default stream
void event_synchronize(void* event, int device);  // waits until the GPU has reached `event`
// Milliseconds from `start` to `end` (both recorded and complete); ~0.5 µs resolution.
float event_elapsed_ms(void* start, void* end, int device);

}  // namespace relgrad::cuda
