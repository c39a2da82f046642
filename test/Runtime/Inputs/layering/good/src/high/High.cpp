#include "fsdp/runtime/high/High.h"
#include <fsdp/runtime/Format.h>
