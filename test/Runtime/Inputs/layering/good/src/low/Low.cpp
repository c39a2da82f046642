#include "fsdp/runtime/low/Low.h"
#include "low/Private.h"
#include <vector>
