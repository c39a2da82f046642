#include "fsdp/Support/ByteSize.h"
