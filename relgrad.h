// relgrad: include this one header for the whole public API.
#pragma once
#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "core/allocator.h"
#include "core/rng.h"
#include "core/safetensors.h"
#include "layers/attention.h"
#include "layers/linear.h"
#include "layers/module.h"
#include "layers/positional.h"
#include "core/tensor.h"
