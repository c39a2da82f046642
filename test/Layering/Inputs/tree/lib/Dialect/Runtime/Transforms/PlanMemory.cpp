#include "fsdp/Dialect/Runtime/Transforms/Passes.h"
