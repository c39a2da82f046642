#include "emu_runtime.h"
