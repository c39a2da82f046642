#include "fsdp/runtime/Format.h"
