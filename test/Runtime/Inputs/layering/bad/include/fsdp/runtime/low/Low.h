#include "fsdp/runtime/Format.h"
#include "low/Private.h"
