#include <fsdp/runtime/high/High.h>
