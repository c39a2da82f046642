#include "fsdp/runtime/high/High.h"
#include "low/Private.h"
#include <fsdp/runtime/Missing.h>
