#include "core/device.h"

#include "core/allocator.h"
#include "core/base/error.h"
#include "cuda/runtime.h"

namespace relgrad {

Device Device::parse(const std::string& name) {
  if (name == "cpu") return cpu();
  if (name == "cuda") return cuda(0);
  if (name.rfind("cuda:", 0) == 0 && name.size() > 5 && name.find_first_not_of("0123456789", 5) == std::string::npos &&
      name.size() < 10)
    return cuda(std::stoi(name.substr(5)));
  throw DeviceError("[device] unknown device '" + name + "' (expected cpu, cuda or cuda:N)");
}

bool cuda_built() { return cuda::built(); }
int cuda_device_count() { return cuda::device_count(); }
bool cuda_available() { return cuda_device_count() > 0; }

size_t device_memory_bytes(const Device& device) {
  if (device.is_cpu()) {
    static const size_t machine = cpu_allocator::machine_memory_bytes();  // a system call: once
    return machine;
  }
  return device.index < cuda_device_count() ? cuda::total_memory_bytes(device.index) : 0;
}

}  // namespace relgrad
