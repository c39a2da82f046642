// Moved to include/fsdp/Support, its definition left behind.
int64_t parseByteSize(const char *text);
