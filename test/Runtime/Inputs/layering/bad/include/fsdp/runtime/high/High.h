#include "fsdp/runtime/low/Low.h"
