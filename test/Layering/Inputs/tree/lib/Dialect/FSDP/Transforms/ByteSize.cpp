#include "fsdp/Dialect/FSDP/Transforms/ByteSize.h"
