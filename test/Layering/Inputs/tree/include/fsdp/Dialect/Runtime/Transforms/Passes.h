// The runtime dialect's passes take a memory budget.
#include "fsdp/Dialect/FSDP/Transforms/ByteSize.h"
