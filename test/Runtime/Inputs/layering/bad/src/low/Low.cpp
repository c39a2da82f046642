#include "fsdp/runtime/low/Low.h"
#include "fsdp/runtime/high/High.h"
